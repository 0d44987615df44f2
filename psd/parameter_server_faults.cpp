// Fault handling of ParameterServer (psd/fault_policy.h): timeouts and dead workers, the run's end
// with them, sync steps without them, rejected non-finite gradients and the abort after
// --max-bad-grads.
#include <spdlog/spdlog.h>

#include <algorithm>

#include "common/pause_detector.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

using wire::Header;

void ParameterServer::keep_waiters_alive(Clock::time_point now) {
    // A worker whose sync step waits for the others is not silent, it is waiting for us; if it
    // dies meanwhile, its connection drops and the step completes without it anyway.
    for (const auto& p : step_waiters_)
        if (!workers_.is_dead(p.worker)) workers_.seen(p.worker, now);
    for (const auto& p : bound_waiters_)  // --max-staleness: the same, waiting for slower workers
        if (!workers_.is_dead(p.worker)) workers_.seen(p.worker, now);
    if (saving_ && !saving_->background &&
        !workers_.is_dead(saving_->waiter.worker))  // the chief, waiting for a forked writer
        workers_.seen(saving_->waiter.worker, now);
}

void ParameterServer::on_worker_rejoined(const std::string& routing, std::uint32_t index) {
    const double dead_for = std::chrono::duration<double>(Clock::now() - workers_.dead_since(index)).count();
    spdlog::warn(
        "worker {} spoke again {:.1f} s after it was declared dead (silent for more than {} ms): it rejoins "
        "the run (a stopped or stalled worker, not a dead one); its next reply tells it so",
        index, dead_for, options_.worker_timeout.count());
    rejoined_.insert(routing);
    on_worker_back(index);
    update_sync_replicas();  // sync: it counts again (a stale gradient is dropped as before)
}

bool ParameterServer::waiting_for_return(Clock::time_point now) {
    // Elastic: a dead worker is dropped, not waited for (it may still speak again before the end).
    if (options_.reconnect_wait.count() <= 0 || drain_.active() || options_.min_workers > 0) return false;
    const auto resumed = PauseDetector::process().window_start(started_);
    const auto back = workers_.returnable(now, options_.reconnect_wait, resumed);
    const double wait_s = static_cast<double>(options_.reconnect_wait.count()) / 1000.0;
    for (auto i : back) {
        if (std::find(awaited_.begin(), awaited_.end(), i) != awaited_.end()) continue;
        awaited_.push_back(i);
        spdlog::warn(
            "every other worker is done or dead, but worker {} (declared dead {:.1f} s ago, silent for more "
            "than {} ms) may still come back: waiting up to {:g} s after its death (--reconnect-wait: a "
            "network that blinked, or a stopped process) before the run ends without it",
            i, std::chrono::duration<double>(now - workers_.dead_since(i)).count(), options_.worker_timeout.count(),
            wait_s);
    }
    if (!back.empty()) return true;
    for (auto i : awaited_)
        if (workers_.is_dead(i))
            spdlog::error("worker {} did not come back within --reconnect-wait {:g} s of its death", i, wait_s);
    awaited_.clear();
    return false;
}

std::uint32_t ParameterServer::take_rejoined(const std::string& routing) {
    return rejoined_.erase(routing) > 0 ? wire::kFlagRejoined : 0;
}

void ParameterServer::update_sync_replicas() {
    if (!sync_) return;
    // Joined workers (psrun join) raise the quorum by one each once they sent a gradient; the dead and
    // the done lower it (elastic, or a step waiting for a worker that will not come).
    const auto running = workers_.quorum_running();
    const auto configured = options_.replicas_to_aggregate + workers_.quorum_joined();
    const auto needed = FaultPolicy::replicas_needed(configured, running, 0);
    if (needed == sync_->replicas()) return;
    spdlog::warn("sync: steps now aggregate {} gradient{} (--replicas-to-aggregate {}{}; dead workers: {})", needed,
                 needed == 1 ? "" : "s", options_.replicas_to_aggregate,
                 workers_.quorum_joined() ? fmt::format(", {} joined", workers_.quorum_joined()) : "",
                 WorkerTable::list(workers_.dead()));
    sync_->set_replicas(needed);
}

void ParameterServer::complete_sync_step() {
    std::vector<std::span<const float>> shape;
    std::vector<std::size_t> offsets;
    for (std::size_t k = 0; k < shard_->slice_ids().size(); ++k) {
        shape.push_back(shard_->param_slice(k));  // only its size is used
        offsets.push_back(shard_->local_offset(k));
    }
    const auto rows = sync_->average_rows();
    shard_->apply(sync_->average(shape, offsets), team_.get(), {}, rows);
    ++counters_.applied;
    if (auto report = sync_->finish_step(shard_->step())) spdlog::info("{}", *report);
    release_pending(step_waiters_, shard_->finished() ? wire::kFlagFinished : 0);
}

void ParameterServer::on_workers_lost() {
    if (!sync_ || !shard_ || !shard_->initialized()) return;
    update_sync_replicas();
    if (sync_->count() > 0 && sync_->count() >= sync_->replicas()) {
        spdlog::warn("sync: completing step {} with the {} gradient{} already received", shard_->step(), sync_->count(),
                     sync_->count() == 1 ? "" : "s");
        complete_sync_step();
    }
}

void ParameterServer::reject_bad_gradient(const std::string& routing, const Header& h, const Error& error) {
    const bool exhausted = faults_.bad_gradient(h.index, h.step, error.message);
    spdlog::warn("worker {}: gradient for step {} rejected, weights untouched ({} rejected{}): {}", h.index, h.step,
                 faults_.bad_gradients(),
                 faults_.max_bad_grads() ? fmt::format(" of --max-bad-grads {}", faults_.max_bad_grads()) : "",
                 error.message);
    if (!exhausted) return reply_error(routing, ErrorCode::kRejected, error.message);
    spdlog::error("{}", faults_.abort_reason());
    reply_aborted(routing, h.index);
    for (auto* pending : {&step_waiters_, &init_waiters_}) {
        for (const auto& p : *pending) reply_aborted(p.routing, p.worker);
        pending->clear();
    }
}

void ParameterServer::reply_aborted(const std::string& routing, std::uint32_t worker) {
    reply_error(routing, ErrorCode::kAborted, faults_.abort_reason());
    if (worker < options_.max_workers) faults_.told(worker);
}

void ParameterServer::check_abort(Clock::time_point now) {
    if (!faults_.aborted()) return;
    bool all_told = true;
    for (std::uint32_t i = 0; i < options_.max_workers; ++i)
        all_told =
            all_told && (!workers_.in_run(i) || faults_.was_told(i) || workers_.is_done(i) || workers_.is_dead(i));
    const auto grace = std::min<Clock::duration>(options_.worker_timeout, std::chrono::seconds(10));
    if (!all_told && now - faults_.aborted_at() < grace) return;
    spdlog::error("exiting: run aborted ({}); every worker was told: {}", faults_.abort_reason(),
                  all_told ? "yes" : "no (grace period over)");
    finish(faults_.exit_code());
}

void ParameterServer::check_timeouts() {
    const auto now = Clock::now();
    // No timeout counts the time this psd was itself stopped (suspend, SIGSTOP): after a stop every
    // worker gets a fresh --worker-timeout to speak again (common/pause_detector.h).
    const auto resumed = PauseDetector::process().window_start(started_);
    if (!init_waiters_.empty() && now - std::max(first_init_wait_, resumed) > options_.init_timeout) {
        const std::string reason =
            fmt::format("no INIT from the chief within {:.1f} s; workers that never said HELLO: {}",
                        options_.init_timeout.count() / 1000.0, WorkerTable::list(workers_.never_attached()));
        spdlog::error("{}", reason);
        for (const auto& p : init_waiters_) reply_error(p.routing, ErrorCode::kTimeout, reason);
        init_waiters_.clear();
    }
    // Standby serves whoever comes: only workers that attached can be missed there.
    const auto attach_timeout = options_.standby ? Clock::duration::max() / 2 : Clock::duration(options_.init_timeout);
    check_abort(now);
    if (exit_code_) return;
    keep_waiters_alive(now);
    const auto never = workers_.never_attached();
    const auto dead = workers_.expire(now, options_.worker_timeout, started_, attach_timeout, resumed);
    if (dead.empty()) {
        if (!awaited_.empty()) check_run_finished();  // a worker we wait for may be out of time
        return;
    }
    for (auto i : dead) {
        if (std::find(never.begin(), never.end(), i) != never.end())
            spdlog::error("worker {} never said HELLO within {} ms: declared dead", i, options_.init_timeout.count());
        else spdlog::error("worker {} silent for more than {} ms: declared dead", i, options_.worker_timeout.count());
    }
    on_workers_dead(dead);
    on_workers_lost();
    release_drain_waiters(false);
    check_run_finished();
}

void ParameterServer::check_run_finished() {
    if (!workers_.run_finished(options_.standby)) {
        awaited_.clear();
        return;
    }
    if (waiting_for_return(Clock::now())) return;
    const auto dead = workers_.dead();
    if (dead.empty() && drain_.preempted() && shard_ && !shard_->finished()) return end_preempted_run();
    if (options_.standby) {
        spdlog::info("run finished ({} done, dead: {}); standby: keeping the shard at step {} for the next run",
                     workers_.count_done(), WorkerTable::list(dead), shard_ ? shard_->step() : 0);
        workers_.reset();
        awaiting_run_init_ = true;
        return;
    }
    if (dead.empty()) {
        spdlog::info("all {} workers are done", workers_.count_done());
        return finish(kExitOk);
    }
    if (finish_elastic(dead)) return;
    spdlog::error("remaining workers are done, but worker {} died: exiting with failure", WorkerTable::list(dead));
    finish(kExitFailure);
}

}  // namespace psrun::psd
