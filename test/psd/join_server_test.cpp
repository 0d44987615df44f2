// Workers that join a running job (issue 38, psrun join) against in-process psd shards on real
// sockets: JOIN's grants and refusals, a joiner's HELLO at its slot, and the sync quorum raised by
// its first gradient (psd/parameter_server_join.cpp).
#include <catch2/catch.hpp>

#include <future>

#include "test/psd/ps_fixture.h"

using namespace psrun;
using namespace psrun::test;

namespace {

// A tool's JOIN for the fixture's cluster (no slot yet: role tool, index 0).
Result<wire::JoinGrant> ask_to_join(const Cluster& cluster, const std::string& model = "small") {
    auto o = cluster.client_options(0, small_model());
    o.role = wire::Role::kTool;
    PsClient tool(o);
    return tool.join(wire::JoinRequest{wire::ModelId{model, ""}, 60});
}

PsClientOptions joiner_options(const Cluster& cluster, std::uint32_t slot) {
    auto o = cluster.client_options(slot, small_model());
    o.role = wire::Role::kWorker;
    o.join = true;
    return o;
}

}  // namespace

TEST_CASE("JOIN: psd without --max-workers has no room; psd 0 hands out slots, then none", "[psd][join]") {
    {
        Cluster plain(1, base_options(1));
        auto refused = ask_to_join(plain);
        REQUIRE_FALSE(refused);
        CHECK(refused.error().code == ErrorCode::kInvalidArgument);
        CHECK_THAT(refused.error().message, Catch::Contains("started without room for workers that join"));
    }
    auto o = base_options(1);
    o.max_workers = 3;
    Cluster cluster(2, o);
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    REQUIRE(chief.init(sgd(0.5f), ramp(chief.layout().total, 1.0f)));
    auto first = ask_to_join(cluster);
    REQUIRE(first);
    CHECK(*first == wire::JoinGrant{1, 1, 3});
    auto second = ask_to_join(cluster);
    REQUIRE(second);
    CHECK(second->index == 2);
    auto full = ask_to_join(cluster);
    REQUIRE_FALSE(full);
    CHECK(full.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(full.error().message, Catch::Contains("no room to join") && Catch::Contains("--max-workers 3"));
    // A joiner says HELLO at its slot on every shard and takes the current parameters.
    PsClient joiner(joiner_options(cluster, 1));
    REQUIRE(joiner.hello());
    CHECK(joiner.servers_initialized());
    std::vector<float> params(joiner.layout().total);
    REQUIRE(joiner.pull(params));
    CHECK(params == ramp(params.size(), 1.0f));
    // Beyond --max-workers: refused on every shard.
    PsClient beyond(joiner_options(cluster, 3));
    auto no = beyond.hello();
    REQUIRE_FALSE(no);
    CHECK_THAT(no.error().message, Catch::Contains("not below --num-workers 1 (--max-workers 3)"));
    auto stats = chief.stats(0);
    REQUIRE(stats);
    CHECK((*stats)["max_workers"] == 3);
    REQUIRE((*stats)["workers_joined"].size() == 1);
    CHECK((*stats)["workers_joined"][0]["worker"] == 1);
    auto stats1 = chief.stats(1);  // psd 1 took the joiner's HELLO too
    REQUIRE(stats1);
    CHECK((*stats1)["workers_attached"] == 2);
}

TEST_CASE("JOIN: another model is refused, as HELLO refuses it", "[psd][join]") {
    auto o = base_options(1);
    o.max_workers = 2;
    Cluster cluster(1, o);
    auto co = cluster.client_options(0, small_model());
    co.model = wire::ModelId{"small", std::string(64, 'a')};
    PsClient chief(co);
    REQUIRE(chief.hello());
    auto tool = cluster.client_options(0, small_model());
    tool.role = wire::Role::kTool;
    PsClient client(tool);
    auto refused = client.join(wire::JoinRequest{wire::ModelId{"other", std::string(64, 'b')}, 10});
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(refused.error().message, Catch::Contains("serves model 'small'") && Catch::Contains("'other'"));
}

TEST_CASE("JOIN, sync: a joiner counts in the steps from its first gradient", "[psd][join]") {
    auto o = base_options(1);
    o.max_workers = 2;
    o.sync = true;
    o.replicas_to_aggregate = 1;
    Cluster cluster(1, o);
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    auto params = ramp(n, 1.0f), ga = ramp(n, 0.4f), gb = ramp(n, -0.2f, 1.0f);
    REQUIRE(chief.init(sgd(0.5f), params));
    auto slot = ask_to_join(cluster);
    REQUIRE(slot);
    PsClient joiner(joiner_options(cluster, slot->index));
    REQUIRE(joiner.hello());
    // Joined, no gradient yet: the chief's step completes alone.
    std::vector<float> out_a(n), out_b(n);
    auto alone = chief.push_pull(ga, 0, out_a);
    REQUIRE(alone);
    CHECK(alone->step == 1);
    // The joiner's first gradient raises the quorum to 2: its step waits for the chief's.
    auto second = std::async(std::launch::async, [&] { return joiner.push_pull(gb, 1, out_b); });
    CHECK(second.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    auto both = chief.push_pull(ga, 1, out_a);
    REQUIRE(both);
    auto b = second.get();
    REQUIRE(b);
    CHECK(both->step == 2);
    CHECK(b->step == 2);
    CHECK(out_a == out_b);
}

TEST_CASE("JOIN: a joiner declared dead that says HELLO again is one join, not two", "[psd][join]") {
    auto o = base_options(1);
    o.max_workers = 3;
    o.worker_timeout = std::chrono::milliseconds(300);
    Cluster cluster(1, o);
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    REQUIRE(chief.init(sgd(0.5f), ramp(chief.layout().total, 1.0f)));
    auto grant = ask_to_join(cluster);
    REQUIRE(grant);
    {
        PsClient joiner(joiner_options(cluster, grant->index));
        REQUIRE(joiner.hello());
    }
    // The joiner falls silent past --worker-timeout (the chief keeps talking) and is declared dead.
    for (int i = 0; i < 10; ++i) {
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
        REQUIRE(chief.stats(0));
    }
    PsClient again(joiner_options(cluster, grant->index));  // the same joiner, reconnected
    REQUIRE(again.hello());
    // A second joiner through JOIN is a join of its own.
    auto second = ask_to_join(cluster);
    REQUIRE(second);
    PsClient other(joiner_options(cluster, second->index));
    REQUIRE(other.hello());
    auto stats = chief.stats(0);
    REQUIRE(stats);
    REQUIRE((*stats)["workers_joined"].size() == 2);
    CHECK((*stats)["workers_joined"][0]["worker"] == grant->index);
    CHECK((*stats)["workers_joined"][1]["worker"] == second->index);
}
