#include "workerd/signal_watcher.h"

#include <poll.h>
#include <spdlog/spdlog.h>

#include <csignal>
#include <cstdlib>

#include "common/result.h"

namespace psrun::worker {

SignalWatcher::SignalWatcher(std::chrono::milliseconds grace, std::chrono::milliseconds deadline)
    : grace_(grace), deadline_(deadline), wait_ms_(grace.count()), thread_([this] { loop(); }) {}

SignalWatcher::~SignalWatcher() {
    quit_.store(true);
    wake_.notify();
    thread_.join();
}

void SignalWatcher::loop() {
    using SteadyClock = std::chrono::steady_clock;
    SteadyClock::time_point since{}, first{};
    while (!quit_.load()) {
        pollfd fds[2] = {{signals_.fd(), POLLIN, 0}, {wake_.fd(), POLLIN, 0}};
        ::poll(fds, 2, 100);
        if (fds[1].revents & POLLIN) wake_.drain();
        while (auto sig = signals_.read_signal()) {
            if (*sig == SIGPIPE || *sig == SIGUSR2 || signal_.load() != 0) continue;
            spdlog::warn("signal {}: stopping after the current step", *sig);
            first = since = SteadyClock::now();
            signal_ns_.store(first.time_since_epoch().count());
            signal_.store(*sig);
        }
        if (signal_.load() == 0) continue;
        if (SteadyClock::now() - first > deadline_) {
            spdlog::error("signal {}: still running {} ms after it: exiting now", signal_.load(), deadline_.count());
            std::_Exit(kExitFailure);
        }
        if (blocked_.load() == 0) {
            since = SteadyClock::now();  // the training thread is working, not waiting: give it time
        } else if (SteadyClock::now() - since > std::chrono::milliseconds(wait_ms_.load())) {
            spdlog::error("signal {}: still waiting for psd after {} ms: exiting now", signal_.load(), wait_ms_.load());
            std::_Exit(kExitFailure);
        }
    }
}

}  // namespace psrun::worker
