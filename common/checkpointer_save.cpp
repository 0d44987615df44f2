// Checkpointer's saves (common/checkpointer.h): blocking, and in the background while the chief
// trains on (SAVE with kFlagBackground, then the same SAVE again to the shards still writing).
#include <spdlog/spdlog.h>

#include <thread>

#include "common/checkpointer.h"
#include "common/pause_detector.h"

namespace psrun {

namespace {

using SteadyClock = std::chrono::steady_clock;

Error not_written(std::uint64_t step, const Error& why) {
    return Error{why.code, "checkpoint at step " + std::to_string(step) +
                               " not written (the previous checkpoint stays valid): " + why.message};
}

std::vector<std::uint32_t> every_shard(const PsClient& client) {
    std::vector<std::uint32_t> shards(client.layout().num_shards);
    for (std::uint32_t i = 0; i < shards.size(); ++i) shards[i] = i;
    return shards;
}

}  // namespace

Error Checkpointer::failed(Error error) {
    ++failures_;
    ++failures_in_row_;
    failed_at_ = SteadyClock::now();
    last_error_ = error.message;
    return error;
}

std::optional<Checkpointer::Background> Checkpointer::supersede() {
    std::optional<Background> taken;
    if (!background_) return taken;
    spdlog::warn("the checkpoint at step {} being written is abandoned (a newer save or a restore supersedes it)",
                 background_->step);
    taken.emplace(std::move(*background_));
    background_.reset();
    return taken;
}

void Checkpointer::abandon() { supersede(); }  // removes its directory

Result<CheckpointInfo> Checkpointer::save(PsClient& client, std::uint64_t global_step, nlohmann::json extra) {
    if (background_ && background_->step == global_step) {  // the one being written is this step's
        PSRUN_TRY_ASSIGN(auto done, poll(client, true));
        if (done) return *done;
    }
    // An older one: this save supersedes it. psd kills its writer when this SAVE arrives, and its
    // directory goes after that (at return): removed before, a file the writer was still creating
    // could land in the emptied directory and keep it.
    const auto superseded = supersede();
    const auto started = SteadyClock::now();
    auto pending = store_.begin(static_cast<std::int64_t>(global_step));
    if (!pending) return tl::unexpected(failed(pending.error()));
    if (auto ok = client.save(global_step, pending->dir()); !ok)
        return tl::unexpected(failed(not_written(global_step, ok.error())));
    return commit(client, *pending, global_step, std::move(extra), started);
}

Result<std::optional<CheckpointInfo>> Checkpointer::start_save(PsClient& client, std::uint64_t global_step,
                                                               nlohmann::json extra) {
    const auto started = SteadyClock::now();
    auto pending = store_.begin(static_cast<std::int64_t>(global_step));
    if (!pending) return tl::unexpected(failed(pending.error()));
    auto writing = client.save_background(global_step, pending->dir(), every_shard(client));
    if (!writing) return tl::unexpected(failed(not_written(global_step, writing.error())));
    if (writing->empty()) {  // every shard wrote before it answered
        PSRUN_TRY_ASSIGN(auto info, commit(client, *pending, global_step, std::move(extra), started));
        return info;
    }
    background_.emplace(Background{std::move(*pending), global_step, std::move(extra), started, std::move(*writing),
                                   SteadyClock::now()});
    return std::nullopt;
}

Result<std::optional<CheckpointInfo>> Checkpointer::poll(PsClient& client, bool wait) {
    while (background_) {
        auto& b = *background_;
        const auto since = SteadyClock::now() - b.asked;
        if (since < kPollInterval) {
            if (!wait) return std::nullopt;
            std::this_thread::sleep_for(kPollInterval - since);
        }
        b.asked = SteadyClock::now();
        auto writing = client.save_background(b.step, b.pending.dir(), b.writing);
        if (!writing) {
            const auto step = b.step;
            background_.reset();  // removes the directory
            return tl::unexpected(failed(not_written(step, writing.error())));
        }
        b.writing = std::move(*writing);
        if (!b.writing.empty()) continue;
        Background done = std::move(*background_);
        background_.reset();
        PSRUN_TRY_ASSIGN(auto info, commit(client, done.pending, done.step, std::move(done.extra), done.started));
        return info;
    }
    return std::nullopt;
}

Result<CheckpointInfo> Checkpointer::commit(PsClient& client, PendingCheckpoint& pending, std::uint64_t global_step,
                                            nlohmann::json extra, SteadyClock::time_point started) {
    nlohmann::json manifest;
    manifest["format"] = "psrun-checkpoint-1";
    manifest["global_step"] = global_step;
    manifest["layout"] = describe_layout(client.layout(), client.tensors());
    manifest["optimizer"] = describe_optimizer(options_.init);
    if (!options_.model.is_null()) manifest["model"] = options_.model;
    manifest["extra"] = std::move(extra);
    auto info = pending.commit(std::move(manifest));  // a failure drops the pending dir
    if (!info)
        return tl::unexpected(failed(Error{info.error().code, "checkpoint at step " + std::to_string(global_step) +
                                                                  " not committed (the previous checkpoint stays "
                                                                  "valid): " +
                                                                  info.error().message}));
    last_step_ = global_step;
    last_time_ = SteadyClock::now();
    stopped_at_last_ = PauseDetector::process().stopped_total();
    failures_in_row_ = 0;
    spdlog::info("checkpoint at step {} written to {} ({} shards, {} ms)", global_step, info->dir,
                 client.layout().num_shards,
                 std::chrono::duration_cast<std::chrono::milliseconds>(last_time_ - started).count());
    return info;
}

}  // namespace psrun
