// Workers that join a running job (issue 38, `psrun join`, docs/reliability.md "Workers that
// join"): psd 0 answers JOIN with a free slot (psd/join_slots.h); every psd takes the joiner's
// HELLO (JOIN flag) at that slot and counts it in sync steps from its first gradient.
#include <spdlog/spdlog.h>

#include "common/zmq_util.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

using wire::Header;
using wire::MessageType;

std::string ParameterServer::model_mismatch(const wire::ModelId& model, const std::string& sender) const {
    if (!shard_ || model_.hash.empty() || model.hash.empty() || model.hash == model_.hash) return "";
    return fmt::format(
        "this psd serves model '{}' (architecture {}) but {} trains model '{}' (architecture {}): "
        "start every worker with the same --model, or restart psd for a new model",
        model_.name, model_.hash.substr(0, 12), sender, model.name, model.hash.substr(0, 12));
}

std::uint32_t ParameterServer::members() const {
    std::uint32_t n = 0;
    for (std::uint32_t i = 0; i < workers_.size(); ++i) n += workers_.in_run(i);
    return n;
}

void ParameterServer::on_join(const std::string& routing, const Header& h, Parts& parts) {
    if (options_.index != 0)
        return reply_error(routing, ErrorCode::kInvalidArgument,
                           "JOIN goes to psd 0, which hands out the worker slots");
    if (h.frames.size() != 1 || h.frames[0].id != wire::kBodyFrame)
        return reply_error(routing, ErrorCode::kProtocol, "JOIN carries exactly one body frame");
    auto request = wire::decode_join_request(view(parts[2]));
    if (!request) return reply_error(routing, ErrorCode::kProtocol, request.error().message);
    if (faults_.aborted()) return reply_aborted(routing, options_.max_workers);
    if (const std::string reason = model_mismatch(request->model, "a joining worker"); !reason.empty()) {
        log_refusal(reason);
        return reply_error(routing, ErrorCode::kInvalidArgument, reason);
    }
    if (!join_slots_->enabled())
        return reply_error(routing, ErrorCode::kInvalidArgument,
                           fmt::format("this psd was started without room for workers that join: it serves the map's "
                                       "{} worker{} (--num-workers); start the job with --max-workers M above that "
                                       "(psrun local/run --max-workers) to let workers join",
                                       options_.num_workers, options_.num_workers == 1 ? "" : "s"));
    if (shard_ && shard_->finished())
        return reply_error(routing, ErrorCode::kInvalidArgument,
                           "the run is over (its last step is trained): nothing to join");
    const auto now = Clock::now();
    const bool elastic = options_.min_workers > 0;
    const auto slot = join_slots_->assign(
        workers_, [&](std::uint32_t i) { return elastic && !(chief_ && *chief_ == i) && i != 0; }, now);
    if (!slot)
        return reply_error(routing, ErrorCode::kInvalidArgument,
                           fmt::format("no room to join: the {} worker slots (--max-workers {}) are all taken or "
                                       "handed out; start the job with a larger --max-workers",
                                       options_.max_workers, options_.max_workers));
    spdlog::info("join: slot {} handed out to a joining worker (model '{}', {} data chunks); {} of {} slots in the run",
                 *slot, request->model.name, request->chunks, members(), options_.max_workers);
    const std::string body =
        wire::encode_join_grant(wire::JoinGrant{*slot, options_.num_workers, options_.max_workers});
    reply(routing, MessageType::kJoin, 0, &body);
}

void ParameterServer::on_join_hello(std::uint32_t index) {
    const auto now = Clock::now();
    // A join, or the same joiner again (it reconnected, maybe after it was declared dead)? psd 0
    // handed the slot out: a HELLO that takes a grant is a join, and so is a slot's first. The
    // other shards see no JOIN: a HELLO at a live joiner's slot is a reconnection there.
    const bool again = options_.index == 0 ? workers_.is_joined(index) && !join_slots_->pending(index)
                                           : workers_.is_joined(index) && workers_.is_attached(index) &&
                                                 !workers_.is_dead(index) && !workers_.is_done(index);
    join_slots_->attached(index);
    workers_.join(index, now);
    if (again) {
        spdlog::info("join: worker {} said HELLO again (it reconnected)", index);
        return;
    }
    const double after = std::chrono::duration<double>(now - started_).count();
    joined_.push_back(Dropped{index, after, shard_ ? shard_->step() : 0});
    spdlog::info("join: worker {} joined the run at global step {}, {:.1f} s into it ({} workers in the run{})", index,
                 joined_.back().step, after, members(), sync_ ? "; sync steps count it from its first gradient" : "");
}

void ParameterServer::activate_joiner(std::uint32_t index) {
    workers_.activate(index);
    if (!sync_) return;
    update_sync_replicas();
}

}  // namespace psrun::psd
