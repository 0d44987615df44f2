// Draining: psd's part of a coordinated stop on preemption (docs/running.md "Preemption").
//
// A SIGTERM/SIGINT/SIGUSR1 while workers are training, or the chief's drain request (HEARTBEAT
// with kFlagDraining), starts draining: every PUSH/PUSH_PULL is answered with kFlagDraining,
// which tells the worker to stop (async: the push is still applied, so that every shard applies
// the same pushes whenever its own signal came; sync: no new step), the chief's drain request is
// answered once the other workers stopped or the budget's hold is over (common/drain_budget.h, shared with the
// chief; parameter_server_drain.cpp), and psd keeps serving SAVE, DONE, PULL,
// STATS and HEARTBEAT, and exits once every worker has sent DONE or died, or when the grace
// period (--signal-grace) is over. The run then ends "preempted": exit kExitPreempted (75) when
// a checkpoint holds the shard's final step, else 1 (and the shard is saved to
// <model-dir>/ps-<i>.shard as a last resort when psd has a model dir).
// A DONE with kFlagDraining (a worker that stopped on its own signal) marks the run as
// preempted too, even when psd itself got no signal.
// Plain state, loop-thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>

#include "common/drain_budget.h"

namespace psrun::psd {

class Drain {
  public:
    using Clock = std::chrono::steady_clock;

    explicit Drain(std::chrono::milliseconds grace) : grace_(grace) {}

    // Starts draining (a no-op when already draining). `signal` 0: the chief's request.
    void begin(int signal, Clock::time_point now);
    bool active() const { return active_; }
    int signal() const { return signal_; }
    // True once the grace period since begin() is over.
    bool expired(Clock::time_point now) const { return active_ && now - since_ > grace_; }
    // True once the budget's hold() since begin() is over: answer the chief's drain request.
    bool hold_over(Clock::time_point now) const { return active_ && now - since_ > budget().hold(); }
    std::chrono::milliseconds grace() const { return grace_; }
    DrainBudget budget() const { return DrainBudget{grace_}; }
    double seconds_since_begin(Clock::time_point now) const;

    // A worker sent DONE with kFlagDraining: it stopped before the last step.
    void worker_preempted() { worker_preempted_ = true; }
    // The run ends preempted (not at its last step) once every worker is done.
    bool preempted() const { return active_ || worker_preempted_; }

    // This psd wrote its shard into a checkpoint at `step`.
    void saved(std::uint64_t step) { saved_step_ = step; }
    std::optional<std::uint64_t> saved_step() const { return saved_step_; }
    // kExitPreempted when a checkpoint holds `shard_step`, else kExitFailure.
    int exit_code(std::uint64_t shard_step) const;

    void reset();  // standby: a new run starts

  private:
    std::chrono::milliseconds grace_;
    bool active_ = false;
    bool worker_preempted_ = false;
    int signal_ = 0;
    Clock::time_point since_{};
    std::optional<std::uint64_t> saved_step_;
};

}  // namespace psrun::psd
