#include "common/pause_detector.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace psrun {

namespace {
// Set by an exit handler: the monitor thread must not touch the logger (or anything else with
// static storage) while exit() destroys it.
std::atomic<bool> exiting{false};
}  // namespace

PauseDetector::PauseDetector(NowFn now, Clock::duration period, Clock::duration threshold)
    : now_(std::move(now)), period_(period), threshold_(threshold), last_tick_(now_()) {}

PauseDetector& PauseDetector::process() {
    // Never destroyed: the monitor thread may tick until the very end of the process.
    static PauseDetector* detector = [] {
        auto* d = new PauseDetector();
        std::atexit([] { exiting.store(true); });  // runs before the destructors of earlier statics (spdlog)
        std::thread([d] {
            while (!exiting.load()) {
                std::this_thread::sleep_for(d->period_);
                if (!exiting.load()) d->tick();
            }
        }).detach();
        return d;
    }();
    return *detector;
}

std::optional<PauseDetector::Stop> PauseDetector::tick_locked() {
    const auto now = std::max(now_(), last_tick_);
    std::optional<Stop> stop;
    if (now - last_tick_ > period_ + threshold_) {
        stop = Stop{last_tick_, now};
        last_stop_ = stop;
        stopped_total_ += stop->length();
        ++stops_;
        if (!exiting.load())
            spdlog::warn("this process was stopped (or not scheduled) for {:.1f} s: every peer gets a fresh timeout "
                     "to answer",
                     stop->seconds());
    }
    last_tick_ = now;
    return stop;
}

std::optional<PauseDetector::Stop> PauseDetector::tick() {
    std::lock_guard lock(mutex_);
    return tick_locked();
}

std::optional<PauseDetector::Stop> PauseDetector::last_stop() {
    std::lock_guard lock(mutex_);
    tick_locked();
    return last_stop_;
}

PauseDetector::Clock::time_point PauseDetector::window_start(Clock::time_point since) {
    std::lock_guard lock(mutex_);
    tick_locked();
    return last_stop_ ? std::max(since, last_stop_->ended) : since;
}

PauseDetector::Clock::duration PauseDetector::stopped_total() {
    std::lock_guard lock(mutex_);
    tick_locked();
    return stopped_total_;
}

std::uint64_t PauseDetector::stops() {
    std::lock_guard lock(mutex_);
    tick_locked();
    return stops_;
}

}  // namespace psrun
