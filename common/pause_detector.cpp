#include "common/pause_detector.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <thread>

namespace psrun {

namespace {
// Set by an exit handler: from then on no tick logs (the logger, a static, is about to be
// destroyed). Read under the detector's mutex, so that the handler, which takes that mutex after
// setting it, also waits for a warning already being written.
std::atomic<bool> exiting{false};
}  // namespace

PauseDetector::PauseDetector(NowFn now, Clock::duration period, Clock::duration threshold)
    : now_(std::move(now)), period_(period), threshold_(threshold), last_tick_(now_()) {}

PauseDetector& PauseDetector::process() {
    // Never destroyed: the monitor thread may tick until the very end of the process.
    static PauseDetector* detector = [] {
        auto* d = new PauseDetector();
        // The handler runs before the destructors of statics built before it is registered:
        // build spdlog's registry first, whoever calls this first.
        (void)spdlog::default_logger_raw();
        static PauseDetector* const exit_detector = d;
        std::atexit([] {
            exiting.store(true);
            std::lock_guard wait_for_tick(exit_detector->mutex_);  // a tick logging now finishes first
        });
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
            spdlog::warn(
                "this process was stopped (or not scheduled) for {:.1f} s: every peer gets a fresh timeout "
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
