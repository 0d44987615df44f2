// psd's draining (psd/drain.h) with in-process servers and real ZeroMQ clients: the chief's drain
// request is answered once the other workers stopped (their last pushes applied on every shard),
// SAVE and DONE are still served, the preempted run ends with 75 when
// a checkpoint holds the final step and with 1 (plus a last-resort shard file) when none does,
// and waiting sync pushes are released.
#include <catch2/catch.hpp>

#include <filesystem>
#include <future>

#include "common/drain_budget.h"
#include "common/exit_codes.h"
#include "common/result.h"
#include "psd/drain.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::small_model;

TEST_CASE("the drain budget: psd holds the drain request half of --signal-grace, the chief waits longer",
          "[psd][drain]") {
    using std::chrono::milliseconds;
    const DrainBudget eight{milliseconds(8000)};
    CHECK(eight.hold() == milliseconds(4000));
    CHECK(eight.reply_wait() == milliseconds(5000));
    CHECK_THAT(eight.describe(), Catch::Contains("--signal-grace 8.0 s") && Catch::Contains("within 4.0 s") &&
                                     Catch::Contains("waits up to 5.0 s"));
    const DrainBudget short_one{milliseconds(1000)};  // the slack never falls below 500 ms
    CHECK(short_one.reply_wait() == milliseconds(1000));
    CHECK(short_one.reply_wait() < short_one.grace + milliseconds(1));
    psd::Drain drain(milliseconds(8000));
    const auto t0 = psd::Drain::Clock::now();
    drain.begin(15, t0);
    CHECK_FALSE(drain.hold_over(t0 + milliseconds(3900)));
    CHECK(drain.hold_over(t0 + milliseconds(4100)));
}

TEST_CASE("a drain request is answered once the other workers stopped; their last pushes count on every shard",
          "[psd][drain]") {
    Cluster cluster(2, test::base_options(2));
    PsClient chief(cluster.client_options(0, small_model()));
    PsClient worker(cluster.client_options(1, small_model()));
    REQUIRE(chief.hello());
    REQUIRE(worker.hello());
    const std::size_t n = chief.layout().total;
    const auto params = ramp(n, 1.0f), grads = ramp(n, 0.5f);
    REQUIRE(chief.init(test::sgd(0.1f, 1000), params));
    std::vector<float> out(n), last(n);
    auto s1 = worker.push_pull(grads, 0, out);
    REQUIRE(s1);
    CHECK_FALSE(s1->draining);
    // The chief's request starts draining at once but its answer waits for worker 1 to stop.
    auto drained = std::async(std::launch::async, [&] { return chief.drain(); });
    CHECK(drained.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    auto s2 = worker.push_pull(grads, 1, last);  // applied by both shards, and told to stop
    REQUIRE(s2);
    CHECK(s2->draining);
    CHECK(s2->step == 2);
    for (std::size_t i = 0; i < n; i += 97) REQUIRE(last[i] == Approx(params[i] - 0.2f * grads[i]));
    CHECK(drained.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    REQUIRE(worker.done(true));
    auto step = drained.get();
    REQUIRE(step);
    CHECK(*step == 2);  // the step the chief checkpoints holds the other worker's last push
    for (std::uint32_t shard : {0u, 1u}) {
        auto stats = chief.stats(shard);
        REQUIRE(stats);
        CHECK((*stats)["applied"] == 2);
        CHECK((*stats)["step"] == 2);
    }
    const std::string dir = cluster.dir() + "/ckpt";
    std::filesystem::create_directories(dir);
    REQUIRE(chief.save(2, dir));
    CHECK(cluster.exit_code(0, 0.3) == -1);  // the chief has not sent DONE yet
    REQUIRE(chief.done(true));
    CHECK(cluster.exit_code(0, 5) == kExitPreempted);
    CHECK(cluster.exit_code(1, 5) == kExitPreempted);
}

TEST_CASE("draining without a checkpoint ends with 1 after the grace and keeps the shard file", "[psd][drain]") {
    auto o = test::base_options(2);
    o.signal_grace = std::chrono::milliseconds(300);
    const std::string model_dir = psrun::test::make_temp_dir();
    o.model_dir = model_dir;
    {
        Cluster cluster(1, o);
        PsClient chief(cluster.client_options(0, small_model()));
        REQUIRE(chief.hello());
        const std::size_t n = chief.layout().total;
        REQUIRE(chief.init(test::sgd(0.1f, 1000), ramp(n, 1.0f)));
        REQUIRE(chief.drain());
        CHECK(cluster.exit_code(0, 0.1) == -1);  // within the grace: still serving
        CHECK(cluster.exit_code(0, 5) == kExitFailure);
        CHECK(std::filesystem::exists(model_dir + "/ps-0.shard"));
    }
    std::filesystem::remove_all(model_dir);
}

TEST_CASE("a worker's DONE(preempted) alone ends an unfinished run with 75 only after a checkpoint", "[psd][drain]") {
    Cluster cluster(1, test::base_options(1));
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    REQUIRE(chief.init(test::sgd(0.1f, 1000), ramp(n, 1.0f)));
    std::vector<float> out(n);
    REQUIRE(chief.push_pull(ramp(n, 0.5f), 0, out));
    const std::string dir = cluster.dir() + "/ckpt";
    std::filesystem::create_directories(dir);
    REQUIRE(chief.save(1, dir));
    REQUIRE(chief.done(true));
    CHECK(cluster.exit_code(0, 5) == kExitPreempted);
}

TEST_CASE("draining releases the workers waiting in a sync step without applying it", "[psd][drain]") {
    auto o = test::base_options(3);
    o.sync = true;
    o.replicas_to_aggregate = 2;
    Cluster cluster(1, o);
    PsClient chief(cluster.client_options(0, small_model()));
    PsClient worker(cluster.client_options(1, small_model()));
    REQUIRE(chief.hello());
    REQUIRE(worker.hello());
    const std::size_t n = chief.layout().total;
    REQUIRE(chief.init(test::sgd(0.1f, 1000), ramp(n, 1.0f)));
    std::vector<float> out(n);
    auto waiting = std::async(std::launch::async, [&] { return worker.push_pull(ramp(n, 0.5f), 0, out); });
    CHECK(waiting.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);  // 1 of 2 replicas
    REQUIRE(chief.drain());
    REQUIRE(waiting.wait_for(std::chrono::seconds(5)) == std::future_status::ready);
    auto step = waiting.get();
    REQUIRE(step);
    CHECK(step->draining);
    CHECK(step->step == 0);
}
