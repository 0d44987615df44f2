// psd/worker_table.h (issue 14): no silence counts from before psd's own stop; a worker declared
// dead that speaks again is revived.
#include <catch2/catch.hpp>

#include "psd/worker_table.h"

using namespace psrun::psd;
using namespace std::chrono_literals;

TEST_CASE("worker table: psd's own stop restarts every silence window", "[worker_table][pause]") {
    WorkerTable t(2);
    const Clock::time_point start{std::chrono::hours(1)};
    t.hello(0, start);
    t.hello(1, start);
    // psd stopped from start+1s to start+20s: at start+22s nobody has been silent 5 s of psd's time.
    const auto resumed = start + 20s;
    CHECK(t.expire(start + 22s, 5s, start, 300s, resumed).empty());
    t.seen(0, start + 23s);
    // Worker 1 stays silent 5 s after the resume: dead, as without any stop.
    const auto dead = t.expire(start + 25500ms, 5s, start, 300s, resumed);
    REQUIRE(dead == std::vector<std::uint32_t>{1});
    CHECK(t.dead_since(1) == start + 25500ms);
    // Without a stop the same silence kills both.
    WorkerTable u(2);
    u.hello(0, start);
    u.hello(1, start);
    CHECK(u.expire(start + 22s, 5s, start, 300s).size() == 2);
}

TEST_CASE("worker table: a dead worker that speaks again is revived once", "[worker_table][pause]") {
    WorkerTable t(2);
    const Clock::time_point start{std::chrono::hours(1)};
    t.hello(0, start);
    t.hello(1, start);
    t.seen(0, start + 6s);
    REQUIRE(t.expire(start + 6s, 5s, start, 300s) == std::vector<std::uint32_t>{1});
    CHECK(t.count_live() == 1);
    CHECK(t.revive(1, start + 12s));
    CHECK_FALSE(t.is_dead(1));
    CHECK_FALSE(t.revive(1, start + 13s));  // already live
    CHECK(t.count_live() == 2);
    t.done(0);
    t.done(1);
    CHECK(t.run_finished(false));
    CHECK(t.dead().empty());
}

TEST_CASE("worker table: a dead worker stays returnable for the grace, not counting psd's own stop",
          "[worker_table][flap]") {
    WorkerTable t(3);
    const Clock::time_point start{std::chrono::hours(1)};
    t.hello(0, start);
    t.hello(1, start);
    t.seen(0, start + 6s);
    // Worker 2 never said HELLO: declared dead at the attach timeout, missing, and never returnable.
    const auto dead = t.expire(start + 6s, 5s, start, 5s);
    REQUIRE(dead == std::vector<std::uint32_t>{1, 2});
    CHECK(t.missing() == std::vector<std::uint32_t>{2});
    t.done(0);
    CHECK(t.run_finished(false));  // done or dead: the caller decides whether to wait
    CHECK(t.returnable(start + 6s, 30s) == std::vector<std::uint32_t>{1});
    CHECK(t.returnable(start + 36s, 30s) == std::vector<std::uint32_t>{1});  // exactly the grace
    CHECK(t.returnable(start + 37s, 30s).empty());
    // psd itself stopped until start+30s: the grace counts from there.
    CHECK(t.returnable(start + 50s, 30s, start + 30s) == std::vector<std::uint32_t>{1});
    CHECK(t.returnable(start + 61s, 30s, start + 30s).empty());
    CHECK(t.returnable(start + 7s, 0s).empty());  // no grace: never waited for
    // It speaks again within the grace: live, and no longer returnable.
    CHECK(t.revive(1, start + 20s));
    CHECK(t.returnable(start + 20s, 30s).empty());
    CHECK_FALSE(t.run_finished(false));
}
