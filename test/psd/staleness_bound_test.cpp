// Bounded staleness (psd --max-staleness, psd/staleness_bound.h): the pure clock rule, then the
// rule inside a real psd behind ZeroMQ sockets: a worker too far ahead waits for the slowest, a
// worker that finishes or dies stops holding the others back, and STATS reports the gradients'
// staleness.
#include <catch2/catch.hpp>

#include <future>

#include "psd/staleness_bound.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::psd::StalenessBound;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::sgd;
using psrun::test::small_model;

TEST_CASE("a worker more than S gradients ahead of the slowest counted one waits", "[staleness]") {
    StalenessBound bound(3, 2);
    bound.set_members({true, true, true});
    for (int k = 0; k < 2; ++k) bound.applied(0);
    CHECK_FALSE(bound.must_wait(0));  // 2 ahead: allowed
    bound.applied(0);
    CHECK(bound.must_wait(0));  // 3 ahead of workers 1 and 2
    CHECK(bound.spread() == 3);
    bound.applied(1);
    CHECK(bound.must_wait(0));  // worker 2 is still at 0
    bound.applied(2);
    CHECK_FALSE(bound.must_wait(0));
    CHECK(bound.slowest() == 1u);
    CHECK_FALSE(bound.must_wait(1));
}

TEST_CASE("S = 0 is lock-step; a worker that stops counting holds nobody back", "[staleness]") {
    StalenessBound bound(2, 0);
    bound.set_members({true, true});
    bound.applied(0);
    CHECK(bound.must_wait(0));
    bound.set_members({true, false});  // worker 1 done or dead
    CHECK_FALSE(bound.must_wait(0));
    CHECK(bound.slowest() == 1u);
    bound.set_members({false, false});
    CHECK_FALSE(bound.slowest());
    CHECK(bound.spread() == 0);
    CHECK_FALSE(bound.must_wait(0));  // not counted: never waits
}

TEST_CASE("a worker that starts counting joins at the slowest clock, never behind it", "[staleness]") {
    StalenessBound bound(3, 1);
    bound.set_members({true, true, false});  // worker 2 has not attached yet
    for (int k = 0; k < 5; ++k) {
        bound.applied(0);
        bound.applied(1);
    }
    bound.set_members({true, true, true});
    CHECK(bound.clock(2) == 5);  // it does not hold the others back for gradients it never sent
    CHECK_FALSE(bound.must_wait(0));
    bound.applied(0);
    bound.applied(0);
    CHECK(bound.must_wait(0));
    // A worker ahead when it comes back keeps its own clock.
    bound.set_members({true, true, false});
    for (int k = 0; k < 3; ++k) bound.applied(2);  // (counted or not, its gradients count)
    bound.set_members({true, true, true});
    CHECK(bound.clock(2) == 8);
    CHECK_THROWS_AS(bound.set_members({true}), std::invalid_argument);
    CHECK_THROWS_AS(StalenessBound(0, 1), std::invalid_argument);
}

TEST_CASE("psd holds the reply of a worker too far ahead until the slowest pushes", "[staleness][psd]") {
    auto o = base_options(2);
    o.max_staleness = 1;
    Cluster cluster(2, o);
    PsClient chief(cluster.client_options(0, small_model()));
    PsClient worker(cluster.client_options(1, small_model()));
    REQUIRE(chief.hello());
    REQUIRE(worker.hello());
    const std::size_t n = chief.layout().total;
    auto params = ramp(n, 1.0f), g = ramp(n, 0.1f);
    REQUIRE(chief.init(sgd(0.1f), params));
    std::vector<float> out(n), out_w(n);
    REQUIRE(worker.pull(out_w));
    REQUIRE(chief.push_pull(g, 0, out));  // 1 ahead of worker 1: allowed
    auto held = std::async(std::launch::async, [&] { return chief.push_pull(g, 1, out); });  // 2 ahead
    CHECK(held.wait_for(std::chrono::milliseconds(400)) == std::future_status::timeout);
    auto w = worker.push_pull(g, 0, out_w);  // worker 1 catches up by one: the chief may go on
    REQUIRE(w);
    auto c = held.get();
    REQUIRE(c);
    CHECK(c->step == 3);  // every gradient applied, none dropped or averaged
    for (std::size_t i = 0; i < n; ++i) REQUIRE(out[i] == Approx(params[i] - 3 * 0.1f * g[i]).margin(1e-5));
    auto stats = chief.stats(0);
    REQUIRE(stats);
    const auto& s = (*stats)["staleness"];
    CHECK(s["max_staleness"] == 1);
    CHECK(s["replies_held"] == 1);
    CHECK(s["longest_held_s"].get<double>() >= 0.3);
    CHECK(s["gradient_max"] == 2);  // worker 1's gradient, computed at step 0, applied as the third update
    CHECK(s["gradient_mean"].get<double>() == Approx(2.0 / 3.0));
    // Worker 1 finishes: it no longer holds the chief back.
    auto again = std::async(std::launch::async, [&] { return chief.push_pull(g, 3, out); });  // 2 ahead again
    CHECK(again.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    REQUIRE(worker.done());
    auto released = again.get();
    REQUIRE(released);
    CHECK(released->step == 4);
    auto alone = chief.push_pull(g, 4, out);  // the only live worker: never waits
    REQUIRE(alone);
    CHECK(alone->step == 5);
    REQUIRE(chief.done());
}

TEST_CASE("psd refuses --max-staleness with --sync", "[staleness][psd]") {
    auto o = base_options(2);
    o.max_staleness = 1;
    o.sync = true;
    o.replicas_to_aggregate = 2;
    o.endpoints = {"ipc:///tmp/psrun-staleness-refused"};
    CHECK_THROWS_WITH(psd::ParameterServer(o), Catch::Contains("--max-staleness") && Catch::Contains("--sync"));
}
