// summary.json's "keyed_tables" (workerd/ps_figures.h): the shards' STATS summed per table, each
// shard kept under "shards" with its psd index, a shard that did not answer left out.
#include <catch2/catch.hpp>

#include <nlohmann/json.hpp>

#include "workerd/ps_figures.h"

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
