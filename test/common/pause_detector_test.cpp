// common/pause_detector.h (issue 14): gaps in a (fake or real) steady clock are this process's
// stops; peer-silence windows start again after them; stopped time adds up.
#include <catch2/catch.hpp>

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <csignal>
#include <thread>

#include "common/pause_detector.h"

using psrun::PauseDetector;
using namespace std::chrono_literals;

namespace {

struct FakeClock {
    PauseDetector::Clock::time_point t{std::chrono::hours(1)};
    PauseDetector::NowFn fn() {
        return [this] { return t; };
    }
};

}  // namespace

TEST_CASE("pause detector: ticks on time are no stop, a long gap is one", "[pause]") {
    FakeClock clock;
    PauseDetector d(clock.fn(), 100ms, 900ms);
    const auto t0 = clock.t;
    for (int i = 0; i < 20; ++i) {
        clock.t += 150ms;  // a late tick (loaded host) is not a stop
        CHECK_FALSE(d.tick());
    }
    CHECK(d.stops() == 0);
    CHECK(d.stopped_total() == 0ms);
    CHECK(d.window_start(t0) == t0);
    const auto before = clock.t;
    clock.t += 15200ms;               // SIGSTOP for 15.2 s
    const auto stop = d.last_stop();  // a query ticks first: no need to wait for the thread
    REQUIRE(stop);
    CHECK(stop->began == before);
    CHECK(stop->ended == clock.t);
    CHECK(stop->seconds() == Approx(15.2));
    CHECK(d.stops() == 1);
    // A peer silent since before the stop gets a fresh window from the end of the stop.
    CHECK(d.window_start(t0) == clock.t);
    // A window that began after the stop is untouched.
    clock.t += 50ms;
    CHECK(d.window_start(clock.t) == clock.t);
    clock.t += 3000ms;
    CHECK(d.stopped_total() == 15200ms + 3000ms);  // the query at +50 ms was a tick
    CHECK(d.stops() == 2);
}

TEST_CASE("pause detector: the process detector sees a real SIGSTOP of this process", "[pause]") {
    auto& d = PauseDetector::process();
    const auto stops_before = d.stops();
    const auto total_before = d.stopped_total();
    const auto t0 = PauseDetector::Clock::now();
    // A child stops us for 1.5 s, then continues us.
    const pid_t parent = ::getpid();
    const pid_t child = ::fork();
    REQUIRE(child >= 0);
    if (child == 0) {
        ::kill(parent, SIGSTOP);
        ::usleep(1500 * 1000);
        ::kill(parent, SIGCONT);
        ::_exit(0);
    }
    int status = 0;
    REQUIRE(::waitpid(child, &status, 0) == child);
    std::this_thread::sleep_for(300ms);
    REQUIRE(d.stops() == stops_before + 1);
    const auto stop = d.last_stop();
    REQUIRE(stop);
    CHECK(stop->seconds() > 1.2);
    CHECK(stop->seconds() < 5.0);
    CHECK(d.stopped_total() - total_before == stop->length());
    CHECK(d.window_start(t0) == stop->ended);
}
