// Detects that this process was stopped (SIGSTOP, Slurm's `scontrol suspend`, gang scheduling,
// a node swapping so hard that no thread ran) and for how long, so that no timeout counts the
// time this process was itself stopped as a peer's silence (issue 14, docs/reliability.md).
//
// Technique: observations ("ticks") of a steady clock (CLOCK_MONOTONIC, which keeps running while
// a process is stopped). A monitor thread ticks every `period`; any caller may tick too. A gap
// between two ticks longer than `period + threshold` means nobody in this process ran for that
// long: a stop from the earlier tick to this one. Because every query ticks first, a caller that
// resumes before the monitor thread does still sees the stop (no race with the thread).
//
// How timers use it:
//  - a peer-silence window or a deadline that began at `t` starts again at window_start(t) (the
//    end of the last stop after t): the peer gets a fresh full timeout after this process resumes;
//  - a periodic timer (the chief's checkpoint timer) discounts stopped_total() growth, so a
//    resumed job does not act as if its whole stop had been working time.
// A thread starved by the scheduler for longer than the threshold also counts as a stop: the
// only effect is one extra timeout for a peer, never a false death.
//
// Thread-safe. Times are steady_clock time points and durations.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <mutex>
#include <optional>

namespace psrun {

class PauseDetector {
  public:
    using Clock = std::chrono::steady_clock;
    using NowFn = std::function<Clock::time_point()>;

    struct Stop {
        Clock::time_point began;  // the last tick before the gap
        Clock::time_point ended;  // the first tick after it
        Clock::duration length() const { return ended - began; }
        double seconds() const { return std::chrono::duration<double>(length()).count(); }
    };

    // A detector that ticks only when tick() (or a query) is called; tests inject `now`.
    explicit PauseDetector(
        NowFn now = [] { return Clock::now(); }, Clock::duration period = std::chrono::milliseconds(100),
        Clock::duration threshold = std::chrono::milliseconds(900));
    PauseDetector(const PauseDetector&) = delete;
    PauseDetector& operator=(const PauseDetector&) = delete;

    // The process-wide detector; its monitor thread (every 100 ms, a stop is a gap above 1 s)
    // starts on the first call and runs until the process exits. From exit() on, no tick logs
    // (exit() waits for a warning being written), so the logger may be destroyed under it.
    static PauseDetector& process();

    // One observation; returns the stop it detected, if any.
    std::optional<Stop> tick();
    // The last stop detected (after a tick).
    std::optional<Stop> last_stop();
    // `since`, or the end of the last stop when that is later (after a tick).
    Clock::time_point window_start(Clock::time_point since);
    // Sum of every stop detected so far (after a tick).
    Clock::duration stopped_total();
    // Number of stops detected so far (after a tick).
    std::uint64_t stops();

  private:
    std::optional<Stop> tick_locked();

    NowFn now_;
    Clock::duration period_;
    Clock::duration threshold_;
    std::mutex mutex_;
    Clock::time_point last_tick_;      // guarded by mutex_
    std::optional<Stop> last_stop_;    // guarded by mutex_
    Clock::duration stopped_total_{};  // guarded by mutex_
    std::uint64_t stops_ = 0;          // guarded by mutex_
};

}  // namespace psrun
