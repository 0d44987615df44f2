#include "workerd/job_join.h"

#include <spdlog/spdlog.h>

#include <chrono>
#include <exception>
#include <string>

namespace psrun::worker {

void check_join_options(const ClusterOptions& c) {
    if (c.chief)
        throw UsageError(
            "--join: a chief never joins (it initialises psd and writes the checkpoints): drop --chief, or "
            "start the job with it");
    if (c.data_chunks == 0)
        throw UsageError(
            "--join needs --data-chunks C (the run's value): a joining worker reads the chunks psd 0 "
            "leases, so that each epoch still visits every example once");
}

Result<wire::JoinGrant> join_running_job(const PsClientOptions& worker, std::uint32_t data_chunks) {
    PsClientOptions tool = worker;  // no slot yet, so no worker index to speak for
    tool.role = wire::Role::kTool;
    tool.index = 0;
    tool.shared_memory = false;
    tool.join = false;
    tool.reconnect_wait = std::chrono::milliseconds(0);
    try {
        PsClient client(tool);
        return client.join(wire::JoinRequest{worker.model, data_chunks});
    } catch (const std::exception& e) {  // a malformed endpoint
        return make_error(ErrorCode::kInvalidArgument, e.what());
    }
}

Result<void> take_join_slot(ClusterOptions& c, PsClientOptions& po) {
    PSRUN_TRY_ASSIGN(auto grant, join_running_job(po, c.data_chunks));
    c.index = grant.index;
    c.num_workers = grant.num_workers;
    po.index = c.index;
    po.join = true;
    spdlog::default_logger()->set_pattern("%H:%M:%S.%e %^%l%$ [workerd:" + std::to_string(c.index) + "] %v");
    spdlog::info("join: psd 0 handed out worker slot {} (the job started with {} workers, room for {})", c.index,
                 grant.num_workers, grant.max_workers);
    return {};
}

}  // namespace psrun::worker
