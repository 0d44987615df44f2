// psd under faults, in process with real ZeroMQ sockets (psd/fault_policy.h): a sync step whose
// worker goes silent completes once psd declares it dead; --max-bad-grads aborts the run with
// ERROR kAborted to everyone; a client sees a psd that goes away at once (common/ps_health.h).
#include <catch2/catch.hpp>

#include <future>
#include <limits>

#include "psd/fault_policy.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::small_model;

namespace {

psd::ServerOptions options(std::uint32_t workers, std::chrono::milliseconds worker_timeout) {
    psd::ServerOptions o;
    o.num_workers = workers;
    o.worker_timeout = worker_timeout;
    return o;
}

wire::InitConfig sgd() {
    wire::InitConfig c;
    c.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 0.5f};
    return c;
}

}  // namespace

TEST_CASE("sync replicas drop to the running workers, never below one", "[psd][faults]") {
    using psd::FaultPolicy;
    CHECK(FaultPolicy::replicas_needed(3, 3, 0) == 3);
    CHECK(FaultPolicy::replicas_needed(3, 3, 1) == 2);
    CHECK(FaultPolicy::replicas_needed(3, 4, 1) == 3);  // a backup worker covers one death
    CHECK(FaultPolicy::replicas_needed(2, 2, 2) == 1);
    psd::FaultPolicy budget(2, 3);
    CHECK_FALSE(budget.bad_gradient(1, 5, "x"));
    CHECK_FALSE(budget.bad_gradient(1, 6, "x"));
    CHECK(budget.bad_gradient(0, 7, "slice 2 contains NaN"));
    CHECK(budget.aborted());
    CHECK_THAT(budget.abort_reason(), Catch::Contains("3 non-finite gradients rejected (--max-bad-grads 3)") &&
                                          Catch::Contains("worker 0 at step 7"));
    psd::FaultPolicy unlimited(1, 0);
    for (int i = 0; i < 1000; ++i) REQUIRE_FALSE(unlimited.bad_gradient(0, 0, "x"));
}

TEST_CASE("a sync step completes when a silent worker is declared dead", "[psd][faults]") {
    auto o = options(2, std::chrono::milliseconds(400));
    o.sync = true;
    o.replicas_to_aggregate = 2;
    Cluster cluster(1, o);
    PsClient chief(cluster.client_options(0, small_model()));
    PsClient silent(cluster.client_options(1, small_model()));
    REQUIRE(chief.hello());
    REQUIRE(silent.hello());
    const std::size_t n = chief.layout().total;
    const auto params = ramp(n, 1.0f), g = ramp(n, 0.4f);
    REQUIRE(chief.init(sgd(), params));
    std::vector<float> out(n);
    const auto t0 = std::chrono::steady_clock::now();
    // Waiting longer than the worker timeout must not get the chief declared dead too.
    auto step = chief.push_pull(g, 0, out);
    const auto waited = std::chrono::steady_clock::now() - t0;
    REQUIRE(step);
    CHECK(step->step == 1);
    CHECK(waited >= std::chrono::milliseconds(200));  // the silent worker's HELLO came first
    CHECK(waited < std::chrono::seconds(3));
    CHECK(out[5] == Approx(params[5] - 0.5f * g[5]));  // the chief's gradient alone
    auto next = chief.push_pull(g, 1, out);            // one replica from now on: no wait
    REQUIRE(next);
    CHECK(next->step == 2);
    auto stats = chief.stats(0);
    REQUIRE(stats);
    CHECK((*stats)["workers_dead"] == nlohmann::json::array({1}));
}

TEST_CASE("--max-bad-grads aborts the run and every request gets kAborted", "[psd][faults]") {
    auto o = options(2, std::chrono::milliseconds(5000));
    o.max_bad_grads = 2;
    Cluster cluster(1, o);
    PsClient chief(cluster.client_options(0, small_model()));
    PsClient other(cluster.client_options(1, small_model()));
    REQUIRE(chief.hello());
    REQUIRE(other.hello());
    const std::size_t n = chief.layout().total;
    const auto params = ramp(n, 1.0f);
    REQUIRE(chief.init(sgd(), params));
    auto g = ramp(n, 0.1f);
    g[3] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> out(n);
    auto first = other.push_pull(g, 0, out);
    REQUIRE_FALSE(first);
    CHECK(first.error().code == ErrorCode::kRejected);
    auto second = other.push_pull(g, 0, out);
    REQUIRE_FALSE(second);
    CHECK(second.error().code == ErrorCode::kAborted);
    CHECK_THAT(second.error().message, Catch::Contains("--max-bad-grads 2"));
    auto chief_push = chief.push_pull(ramp(n, 0.1f), 0, out);
    REQUIRE_FALSE(chief_push);
    CHECK(chief_push.error().code == ErrorCode::kAborted);
    CHECK(cluster.exit_code(0, 5) == 1);  // both workers were told: psd exits 1 at once
}

TEST_CASE("a client sees a psd that goes away at once, not after the reply timeout", "[psd][faults]") {
    auto cluster = std::make_unique<Cluster>(1, options(1, std::chrono::milliseconds(5000)));
    auto co = cluster->client_options(0, small_model());
    co.reply_timeout = std::chrono::milliseconds(20000);
    PsClient chief(co);
    REQUIRE(chief.hello());
    CHECK_FALSE(chief.lost_shard());
    cluster.reset();  // the psd closes its socket (as the kernel does for a killed process)
    const auto t0 = std::chrono::steady_clock::now();
    auto r = chief.stats(0);
    REQUIRE_FALSE(r);
    CHECK(std::chrono::steady_clock::now() - t0 < std::chrono::seconds(3));
    CHECK_THAT(r.error().message, Catch::Contains("lost the connection to ps 0 (" + co.endpoints[0] + ")"));
    CHECK(chief.lost_shard() == std::optional<std::uint32_t>(0));
}
