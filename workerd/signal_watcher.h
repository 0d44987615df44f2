// Termination signals for the distributed worker. A thread reads the signalfd: SIGINT/SIGTERM
// set stop_requested() (the training loop stops after the current step), and if the training
// thread is then blocked on psd (an exchange whose psd is gone, the start barrier) for longer
// than `grace`, the process exits 1 at once instead of waiting for a reply timeout. SIGINT,
// SIGTERM and SIGUSR1 (Slurm's warning signal) all mean "stop"; a process still alive
// `deadline` after the first of them exits 1 (the preemption checkpoint took too long).
// Call block_termination_signals() first. stop_requested() and Blocked are thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <thread>

#include "common/signals.h"

namespace psrun::worker {

class SignalWatcher {
  public:
    explicit SignalWatcher(std::chrono::milliseconds grace = std::chrono::milliseconds(3000),
                           std::chrono::milliseconds deadline = std::chrono::milliseconds(9000));
    ~SignalWatcher();
    SignalWatcher(const SignalWatcher&) = delete;
    SignalWatcher& operator=(const SignalWatcher&) = delete;

    bool stop_requested() const { return signal_.load() != 0; }
    int signal() const { return signal_.load(); }
    // When the stopping signal arrived (valid once stop_requested()).
    std::chrono::steady_clock::time_point signal_time() const {
        return std::chrono::steady_clock::time_point(std::chrono::steady_clock::duration(signal_ns_.load()));
    }

    std::chrono::milliseconds deadline() const { return deadline_; }

    // Marks the training thread as waiting for psd while it lives. `grace`, when given, replaces
    // the watcher's grace while this Blocked lives (the chief's drain request waits the drain
    // budget's reply_wait(), common/drain_budget.h). Not nested with another Blocked that has one.
    class Blocked {
      public:
        explicit Blocked(SignalWatcher& w) : w_(w) { w_.blocked_.fetch_add(1); }
        Blocked(SignalWatcher& w, std::chrono::milliseconds grace) : w_(w), custom_(true) {
            w_.wait_ms_.store(grace.count());
            w_.blocked_.fetch_add(1);
        }
        ~Blocked() {
            w_.blocked_.fetch_sub(1);
            if (custom_) w_.wait_ms_.store(w_.grace_.count());
        }
        Blocked(const Blocked&) = delete;
        Blocked& operator=(const Blocked&) = delete;

      private:
        SignalWatcher& w_;
        bool custom_ = false;
    };

  private:
    void loop();

    std::chrono::milliseconds grace_;
    std::chrono::milliseconds deadline_;
    std::atomic<std::chrono::milliseconds::rep> wait_ms_;  // the grace in force (Blocked may raise it)
    std::atomic<std::chrono::steady_clock::rep> signal_ns_{0};
    SignalFd signals_;
    WakeFd wake_;
    std::atomic<int> signal_{0};
    std::atomic<int> blocked_{0};
    std::atomic<bool> quit_{false};
    std::thread thread_;
};

}  // namespace psrun::worker
