// psd's bounded staleness (--max-staleness S, psd/staleness_bound.h): holding and releasing the
// replies of workers too far ahead, and the staleness figures in STATS.
#include <algorithm>

#include <spdlog/spdlog.h>

#include "psd/parameter_server.h"

namespace psrun::psd {

namespace {

std::vector<bool> counted_workers(const WorkerTable& workers) {
    std::vector<bool> counted(workers.size());
    for (std::uint32_t w = 0; w < workers.size(); ++w)
        counted[w] = workers.is_attached(w) && !workers.is_done(w) && !workers.is_dead(w);
    return counted;
}

}  // namespace

void ParameterServer::answer_bounded(const std::string& routing, const wire::Header& h, const RowFrames& rows,
                                     const std::function<void()>& answer) {
    if (!bound_) return answer();
    bound_->set_members(counted_workers(workers_));
    bound_->applied(h.index);
    if (drain_.active() || shard_->finished() || !bound_->must_wait(h.index)) return answer();
    bound_waiters_.push_back(
        Pending{routing, h.type, h.index, h.flags & wire::kFlagBf16, copy_pulls(rows), Clock::now()});
    ++counters_.bound_held;
    spdlog::debug("worker {} is {} gradients ahead of the slowest live worker (--max-staleness {}): its reply waits",
                  h.index, bound_->clock(h.index) - bound_->slowest().value_or(0), bound_->bound());
}

void ParameterServer::release_bounded() {
    if (!bound_ || bound_waiters_.empty()) return;
    bound_->set_members(counted_workers(workers_));
    const bool all = drain_.active() || !shard_ || shard_->finished();
    std::vector<Pending> go;
    std::erase_if(bound_waiters_, [&](Pending& p) {
        if (!all && bound_->must_wait(p.worker)) return false;
        go.push_back(std::move(p));
        return true;
    });
    if (go.empty()) return;
    const auto now = Clock::now();
    for (const auto& p : go) {
        const double held = std::chrono::duration<double>(now - p.since).count();
        counters_.bound_held_s += held;
        counters_.bound_longest_s = std::max(counters_.bound_longest_s, held);
    }
    std::uint32_t flags = 0;
    if (shard_ && shard_->finished()) flags |= wire::kFlagFinished;
    if (drain_.active()) flags |= wire::kFlagDraining;
    release_pending(go, flags);
}

nlohmann::json ParameterServer::staleness_json() const {
    nlohmann::json j;
    const auto applied = options_.sync ? 0 : counters_.applied;
    j["gradient_mean"] = applied ? double(counters_.staleness_sum) / double(applied) : 0.0;
    j["gradient_max"] = counters_.staleness_max;
    j["max_staleness"] = options_.max_staleness ? nlohmann::json(*options_.max_staleness) : nlohmann::json(nullptr);
    j["replies_held"] = counters_.bound_held;
    j["held_s"] = counters_.bound_held_s;
    j["longest_held_s"] = counters_.bound_longest_s;
    j["clock_spread"] = bound_ ? bound_->spread() : 0;
    return j;
}

}  // namespace psrun::psd
