// summary.json's "keyed_tables" and "staleness" (workerd/ps_figures.h): the shards' STATS summed
// per table, or the largest figure over the shards, each shard kept under "shards" with its psd
// index, a shard that did not answer left out.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "workerd/ps_figures.h"

using psrun::worker::combine_staleness;
using psrun::worker::sum_keyed_tables;

TEST_CASE("ps figures: keyed tables are summed over the shards that answered", "[ps_figures]") {
    const auto shard0 = nlohmann::json::parse(R"({"emb_i": {"rows": 90, "capacity": 100, "admitted": 120,
        "refused": 4, "refused_full": 7, "evicted_full": 30, "evicted_idle": 0, "gradients_dropped": 11},
        "emb_u": {"rows": 5, "capacity": 50, "admitted": 5, "refused": 0, "refused_full": 0,
        "evicted_full": 0, "evicted_idle": 0, "gradients_dropped": 0}})");
    const auto shard2 = nlohmann::json::parse(R"({"emb_i": {"rows": 80, "capacity": 100, "admitted": 81,
        "refused": 1, "refused_full": 2, "evicted_full": 1, "evicted_idle": 3, "gradients_dropped": 2}})");
    const auto sum = sum_keyed_tables({shard0, nullptr, shard2});
    REQUIRE(sum.contains("emb_i"));
    const auto& i = sum["emb_i"];
    CHECK(i["rows"] == 170);
    CHECK(i["capacity"] == 200);
    CHECK(i["admitted"] == 201);
    CHECK(i["refused_full"] == 9);
    CHECK(i["evicted_full"] == 31);
    CHECK(i["evicted_idle"] == 3);
    CHECK(i["gradients_dropped"] == 13);
    REQUIRE(i["shards"].size() == 2);
    CHECK(i["shards"][0]["psd"] == 0);
    CHECK(i["shards"][1]["psd"] == 2);
    CHECK(i["shards"][1]["rows"] == 80);
    REQUIRE(sum.contains("emb_u"));
    CHECK(sum["emb_u"]["rows"] == 5);
    CHECK(sum["emb_u"]["shards"].size() == 1);
    CHECK(sum_keyed_tables({}).empty());
    CHECK(sum_keyed_tables({nullptr, nlohmann::json::object()}).empty());
}

TEST_CASE("ps figures: staleness is the largest over the shards", "[ps_figures]") {
    // Worker 1 stopped after its push to psd 0 and before psd 1's: only psd 1 held the chief.
    const auto shard0 = nlohmann::json::parse(R"({"gradient_mean": 0.8, "gradient_max": 5, "max_staleness": 2,
        "replies_held": 40, "held_s": 0.2, "longest_held_s": 0.016, "clock_spread": 2})");
    const auto shard1 = nlohmann::json::parse(R"({"gradient_mean": 1.0, "gradient_max": 4, "max_staleness": 2,
        "replies_held": 31, "held_s": 2.1, "longest_held_s": 1.98, "clock_spread": 3})");
    const auto s = combine_staleness({shard0, shard1});
    CHECK(s["longest_held_s"] == 1.98);
    CHECK(s["held_s"] == 2.1);
    CHECK(s["replies_held"] == 40);
    CHECK(s["gradient_max"] == 5);
    CHECK(s["clock_spread"] == 3);
    CHECK(s["max_staleness"] == 2);
    CHECK(s["gradient_mean"].get<double>() == Approx(0.9));
    REQUIRE(s["shards"].size() == 2);
    CHECK(s["shards"][1]["psd"] == 1);
    CHECK(s["shards"][1]["longest_held_s"] == 1.98);
    // No bound: max_staleness stays null; a shard that did not answer is left out.
    const auto free = combine_staleness(
        {nullptr, nlohmann::json::parse(
                      R"({"gradient_mean": 1.5, "gradient_max": 3746, "max_staleness": null, "replies_held": 0,
            "held_s": 0.0, "longest_held_s": 0.0, "clock_spread": 0})")});
    CHECK(free["max_staleness"].is_null());
    CHECK(free["gradient_max"] == 3746);
    CHECK(free["shards"].size() == 1);
    CHECK(free["shards"][0]["psd"] == 1);
    CHECK(combine_staleness({nullptr, nullptr}).is_null());
}
