// psd/join_slots.h and the joinable slots of psd/worker_table.h (issue 38, psrun join), without
// sockets: which slot a joiner gets, reservations, the slots nobody waits for, the sync quorum.
#include <catch2/catch.hpp>

#include "psd/join_slots.h"
#include "psd/worker_table.h"

using namespace psrun::psd;
using namespace std::chrono_literals;

namespace {
const Clock::time_point kStart{std::chrono::hours(1)};
const auto kNoDrop = [](std::uint32_t) { return false; };
}  // namespace

TEST_CASE("join slots: the lowest free joinable slot, reserved until HELLO", "[join]") {
    WorkerTable t(2, 4);
    JoinSlots s(2, 4, 10s);
    CHECK(s.enabled());
    t.hello(0, kStart);
    t.hello(1, kStart);
    REQUIRE(s.assign(t, kNoDrop, kStart) == 2u);
    CHECK(s.is_reserved(2, kStart + 1s));
    REQUIRE(s.assign(t, kNoDrop, kStart) == 3u);  // 2 is reserved
    CHECK_FALSE(s.assign(t, kNoDrop, kStart));    // 4 of 4: no room
    t.join(2, kStart + 1s);
    s.attached(2);
    CHECK_FALSE(s.is_reserved(2, kStart + 1s));
    CHECK_FALSE(s.assign(t, kNoDrop, kStart + 2s));  // 2 attached, 3 still reserved
    // The joiner handed slot 3 never said HELLO: its reservation lapses and the slot is handed out again.
    CHECK(s.assign(t, kNoDrop, kStart + 11s) == 3u);
    CHECK(s.handed_out() == 3);
}

TEST_CASE("join slots: a slot dropped for good is reused once no fresh one is left", "[join]") {
    WorkerTable t(3, 4);
    JoinSlots s(3, 4, 10s);
    for (std::uint32_t i = 0; i < 3; ++i) t.hello(i, kStart);
    t.seen(0, kStart + 6s);
    t.seen(1, kStart + 6s);
    REQUIRE(t.expire(kStart + 6s, 5s, kStart, 300s) == std::vector<std::uint32_t>{2});  // worker 2 dead
    const auto dropped = [](std::uint32_t i) { return i != 0; };                        // elastic, not the chief
    REQUIRE(s.assign(t, dropped, kStart + 7s) == 3u);                                   // the fresh slot first
    REQUIRE(s.assign(t, dropped, kStart + 7s) == 2u);                                   // then the dropped one
    CHECK_FALSE(s.assign(t, dropped, kStart + 7s));
    // Not elastic: a dead worker's slot is never handed out.
    JoinSlots plain(3, 4, 10s);
    REQUIRE(plain.assign(t, kNoDrop, kStart + 7s) == 3u);
    CHECK_FALSE(plain.assign(t, kNoDrop, kStart + 7s));
    // The joiner at slot 2 takes it afresh: live, joining, no longer dead.
    t.join(2, kStart + 8s);
    CHECK_FALSE(t.is_dead(2));
    CHECK(t.is_joining(2));
}

TEST_CASE("join slots: without --max-workers there is no room", "[join]") {
    WorkerTable t(2);
    JoinSlots s(2, 2, 10s);
    CHECK_FALSE(s.enabled());
    CHECK_FALSE(s.assign(t, kNoDrop, kStart));
    CHECK(t.size() == 2);
    CHECK_THROWS(JoinSlots(3, 2, 10s));
    CHECK_THROWS(JoinSlots(0, 2, 10s));
}

TEST_CASE("worker table: joinable slots are never awaited nor missed", "[join][worker_table]") {
    WorkerTable t(2, 4);
    CHECK(t.size() == 4);
    CHECK(t.expected() == 2);
    t.hello(0, kStart);
    // At the attach timeout only worker 1 (of the map) is declared dead, not the empty slots 2 and 3.
    CHECK(t.expire(kStart + 301s, 1000s, kStart, 300s) == std::vector<std::uint32_t>{1});
    CHECK(t.never_attached() == std::vector<std::uint32_t>{1});
    CHECK(t.missing() == std::vector<std::uint32_t>{1});
    WorkerTable u(2, 4);
    u.hello(0, kStart);
    u.hello(1, kStart);
    u.done(0);
    u.done(1);
    CHECK(u.run_finished(false));  // slots 2 and 3 empty: the run is over
    u.join(3, kStart + 1s);
    CHECK_FALSE(u.run_finished(false));  // a joiner is a worker of the run: wait for its DONE
    u.done(3);
    CHECK(u.run_finished(false));
}

TEST_CASE("worker table: a joiner counts in the sync quorum from its first gradient", "[join][worker_table]") {
    WorkerTable t(2, 4);
    t.hello(0, kStart);
    t.hello(1, kStart);
    CHECK(t.quorum_running() == 2);
    CHECK(t.quorum_joined() == 0);
    t.join(2, kStart + 1s);
    CHECK(t.is_joining(2));
    CHECK(t.quorum_running() == 2);  // joined, no gradient yet
    CHECK(t.quorum_joined() == 0);
    t.activate(2);
    CHECK(t.quorum_running() == 3);
    CHECK(t.quorum_joined() == 1);
    // A HELLO again from the live joiner (it reconnected) keeps it counted.
    t.join(2, kStart + 2s);
    CHECK_FALSE(t.is_joining(2));
    CHECK(t.quorum_running() == 3);
    // It dies: it leaves the running count; the joined count (which raises --replicas-to-aggregate) stays.
    t.seen(0, kStart + 8s);
    t.seen(1, kStart + 8s);
    REQUIRE(t.expire(kStart + 8s, 5s, kStart, 300s) == std::vector<std::uint32_t>{2});
    CHECK(t.quorum_running() == 2);
    CHECK(t.quorum_joined() == 1);
    CHECK(t.in_run(2));
    CHECK_FALSE(t.in_run(3));
}
