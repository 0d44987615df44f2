// Preemption handling of ParameterServer: signals start draining (psd/drain.h has the contract).
#include <spdlog/spdlog.h>

#include "common/exit_codes.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

using wire::MessageType;

void ParameterServer::on_signal(int sig) {
    if (drain_.active()) {
        spdlog::warn("signal {} while draining: still waiting for the checkpoint ({:.1f} of {:.1f} s used)", sig,
                     drain_.seconds_since_begin(Clock::now()), drain_.grace().count() / 1000.0);
        return;
    }
    if (!shard_ || !shard_->initialized() || workers_.count_live() == 0) {
        spdlog::info("received signal {}: shutting down (no training in progress)", sig);
        stop_requested_.store(true);
        return;
    }
    begin_drain(sig);
}

void ParameterServer::begin_drain(int sig) {
    if (drain_.active()) return;
    drain_.begin(sig, Clock::now());
    spdlog::warn(
        "{}: draining at step {}: workers are told to stop; waiting up to {:.1f} s for the chief's checkpoint and "
        "DONE from {} live worker(s) ({})",
        sig ? fmt::format("signal {}", sig) : std::string("chief's drain request"), shard_->step(),
        drain_.grace().count() / 1000.0, workers_.count_live(), drain_.budget().describe());
    // Sync: the partial step is dropped; its waiting workers learn that psd drains.
    release_pending(step_waiters_, wire::kFlagDraining);
    if (sync_) sync_ = make_sync();
}

bool ParameterServer::others_stopped(std::uint32_t chief) const {
    const bool chief_live = chief < workers_.size() && !workers_.is_done(chief) && !workers_.is_dead(chief);
    return workers_.count_live() <= (chief_live ? 1u : 0u);
}

void ParameterServer::release_drain_waiters(bool timed_out) {
    if (drain_waiters_.empty()) return;
    if (!timed_out && !sync_ && !others_stopped(drain_waiters_.front().worker)) return;
    if (timed_out)
        spdlog::warn("draining: {} worker(s) still training after {:.1f} s: answering the chief's drain request anyway",
                     workers_.count_live() - 1, drain_.seconds_since_begin(Clock::now()));
    for (const auto& p : drain_waiters_) reply(p.routing, MessageType::kAck, wire::kFlagDraining);
    drain_waiters_.clear();
}

void ParameterServer::check_drain() {
    // The budget's hold for the other workers to stop, the rest for the chief's checkpoint.
    if (!drain_waiters_.empty() && drain_.hold_over(Clock::now())) release_drain_waiters(true);
    if (!drain_.expired(Clock::now())) return;
    spdlog::error("draining: {:.1f} s are over and worker(s) {} sent no DONE: exiting", drain_.grace().count() / 1000.0,
                  WorkerTable::list([&] {
                      std::vector<std::uint32_t> missing;
                      for (std::uint32_t i = 0; i < workers_.size(); ++i)
                          if (!workers_.is_done(i)) missing.push_back(i);
                      return missing;
                  }()));
    end_preempted_run();
}

void ParameterServer::end_preempted_run() {
    settle_threaded_save();
    const std::uint64_t step = shard_->step();
    int code = drain_.exit_code(step);
    if (code == kExitPreempted) {
        spdlog::info("preempted at step {}: the last checkpoint holds this shard's final state", step);
    } else {
        spdlog::error("preempted at step {}, but no checkpoint holds it (last saved: {})", step,
                      drain_.saved_step() ? std::to_string(*drain_.saved_step()) : std::string("none"));
        if (!options_.model_dir.empty() && !options_.standby) {  // standby's finish() saves it anyway
            shard_->rows().materialize(team_.get());
            if (auto saved = shard_->save(shard_path(), chunks_.get()); saved)
                spdlog::warn("saved this shard (step {}) to {} as a last resort", step, shard_path());
            else spdlog::error("{}", saved.error().message);
        }
    }
    if (options_.standby && drain_.signal() == 0) {  // the chief's request: serve the next run
        spdlog::info("standby: run preempted at step {}; keeping the shard for the next run", step);
        workers_.reset();
        drain_.reset();
        return;
    }
    finish(code);
}

}  // namespace psrun::psd
