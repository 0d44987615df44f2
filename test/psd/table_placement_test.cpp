// Small sparse tables placed whole on one psd shard (common/tensor_layout.h compute_layout's
// planner, docs/protocol.md "Sparse tables"): which tables go whole and where, the layout and
// WELCOME carrying it, psd serving and training such tables over real sockets, and checkpoints
// restored across shard counts (whole -> spread, spread -> whole, whole -> whole elsewhere).
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <numeric>
#include <set>

#include "common/wire.h"
#include "psd/shard_state.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::adam;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;

namespace table_placement_test {

namespace {

constexpr std::uint32_t kWidth = 4;

// A dense layer, a large table (spread with K > 1), three small vocabulary tables and a small
// keyed table. Everything: 40 + 16000 + 1200 + 388 + 20 + 800 = 18448 floats.
std::vector<TensorSpec> model() {
    std::vector<TensorSpec> t = {{"fc/w", {8, 5}},     {"big", {4000, kWidth}}, {"s1", {300, kWidth}},
                                 {"s2", {97, kWidth}}, {"s3", {5, kWidth}},     {"k4", {200, kWidth}}};
    for (std::size_t i = 1; i < t.size(); ++i) {
        t[i].kind = i == 5 ? TensorKind::kKeyedRows : TensorKind::kRows;
        t[i].row_init = RowInit{RowInitKind::kNormal, 0.05f, 11 + i};
    }
    return t;
}

std::uint64_t raw_id(std::uint64_t i) { return 0x9E3779B97F4A7C15ULL * (i + 1) << 8; }

std::vector<std::uint32_t> step_ids(std::uint32_t rows, int s) {
    std::vector<std::uint32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back(static_cast<std::uint32_t>((i * 61 + s * 17) % rows));
    return ids;
}

std::vector<std::uint64_t> step_keys(int s) {
    std::vector<std::uint64_t> keys;
    for (int i = 0; i < 30; ++i) keys.push_back(raw_id(static_cast<std::uint64_t>((i * 7 + s * 3) % 150)));
    return keys;
}

// Step s of a fixed run: a gradient for every table (the keyed table's rows pulled first: that
// admits them) and the dense tensor.
void step(PsClient& client, int s) {
    const auto keys = step_keys(s);
    const RowRequest admit{.tensor = 5, .keys = keys};
    PulledRows pulled;
    REQUIRE(client.exchange(Exchange{.pulls = {&admit, 1}, .rows = &pulled}));
    std::vector<std::vector<std::uint32_t>> ids;
    std::vector<std::vector<float>> values;
    const auto tensors = model();
    for (std::uint32_t t = 1; t <= 4; ++t) {
        ids.push_back(step_ids(tensors[t].shape[0], s));
        values.push_back(ramp(ids.back().size() * kWidth, 0.1f * static_cast<float>(s + t), -0.05f));
    }
    values.push_back(ramp(keys.size() * kWidth, 0.2f * static_cast<float>(s + 1), -0.03f));
    std::vector<RowGrads> grads;
    for (std::uint32_t t = 1; t <= 4; ++t)
        grads.push_back(RowGrads{.tensor = t, .ids = ids[t - 1], .values = values[t - 1]});
    grads.push_back(RowGrads{.tensor = 5, .values = values[4], .keys = keys});
    REQUIRE(client.exchange(Exchange{.grads = ramp(client.layout().total, 0.1f, static_cast<float>(s)),
                                     .step = static_cast<std::uint64_t>(s),
                                     .row_grads = grads}));
}

// Every row of the vocabulary tables, the keyed table's rows of the ids the run used, and the
// dense tensor, in one buffer.
std::vector<float> everything(PsClient& client) {
    const auto tensors = model();
    std::vector<std::vector<std::uint32_t>> ids;
    std::vector<RowRequest> requests;
    for (std::uint32_t t = 1; t <= 4; ++t) {
        ids.emplace_back(tensors[t].shape[0]);
        std::iota(ids.back().begin(), ids.back().end(), 0u);
    }
    for (std::uint32_t t = 1; t <= 4; ++t) requests.push_back(RowRequest{.tensor = t, .ids = ids[t - 1]});
    std::vector<std::uint64_t> keys;
    for (std::uint64_t i = 0; i < 150; ++i) keys.push_back(raw_id(i));
    requests.push_back(RowRequest{.tensor = 5, .keys = keys});
    PulledRows rows;
    ParamFrames dense;
    REQUIRE(client.exchange(Exchange{.pulls = requests, .params = &dense, .rows = &rows, .lookup = true}));
    std::vector<float> out;
    for (std::size_t r = 0; r < requests.size(); ++r) out.insert(out.end(), rows.rows(r).begin(), rows.rows(r).end());
    std::vector<float> params(client.layout().total);
    dense.copy_to(params, client.layout());
    out.insert(out.end(), params.begin(), params.end());
    return out;
}

}  // namespace

TEST_CASE("the planner puts small tables whole on the least loaded shards and spreads the rest",
          "[layout][placement]") {
    const auto tensors = model();
    // Small: at most 18448 / (4K) floats: every table but `big` with K = 2 and 3; with K = 4 (1153)
    // s1's 1200 floats stay spread too.
    for (std::uint32_t k = 2; k <= 3; ++k) {
        INFO(k << " shards");
        auto layout = compute_layout(tensors, k);
        REQUIRE(layout);
        REQUIRE(layout->tables.size() == 5);
        CHECK_FALSE(layout->tables[0].whole());  // 16000 floats: more than 1/(4K) of everything
        std::set<std::uint32_t> homes;
        for (std::size_t t = 1; t < 5; ++t) {
            const RowTable& table = layout->tables[t];
            REQUIRE(table.whole());
            REQUIRE(table.home < k);
            homes.insert(table.home);
            for (std::uint32_t s = 0; s < k; ++s) CHECK(table.rows_on(s, k) == (s == table.home ? table.num_rows : 0));
            CHECK(table.owner(table.num_rows - 1, k) == table.home);
            CHECK(table.local_row(table.num_rows - 1, k) == table.num_rows - 1);
            CHECK(table.global_row(3, table.home, k) == 3);
        }
        CHECK(homes.size() >= 2);  // balanced over the shards, not piled on one
        // The greedy bound: no shard holds more than the least loaded one plus the largest whole table.
        std::vector<std::uint64_t> load(k, 0);
        for (std::uint32_t s = 0; s < k; ++s) {
            load[s] = layout->shard_size(s);
            for (const auto& t : layout->tables) load[s] += t.rows_on(s, k) * t.width;
        }
        CHECK(*std::max_element(load.begin(), load.end()) - *std::min_element(load.begin(), load.end()) <= 1200 + 40);
        CHECK(validate_layout(*layout, tensors));
        CHECK(*compute_layout(tensors, k) == *layout);  // a pure function of (tensors, K)
        auto far = *layout;
        far.tables[1].home = k;
        CHECK_FALSE(validate_layout(far, tensors));
        // WELCOME carries the placement; a home beyond the shards is refused.
        auto welcome = wire::decode_welcome(wire::encode_welcome(wire::Welcome{0, *layout, 5}));
        REQUIRE(welcome);
        CHECK(welcome->layout == *layout);
        CHECK_FALSE(wire::decode_welcome(wire::encode_welcome(wire::Welcome{0, far, 5})));
    }
    const auto four = compute_layout(tensors, 4);
    REQUIRE(four);
    CHECK_FALSE(four->tables[0].whole());
    CHECK_FALSE(four->tables[1].whole());
    for (std::size_t t = 2; t < 5; ++t) CHECK(four->tables[t].whole());
    // One shard, or a table that is most of the model: spread as before.
    const auto one = compute_layout(tensors, 1);
    REQUIRE(one);
    for (const auto& t : one->tables) CHECK_FALSE(t.whole());
    const std::vector<TensorSpec> lone = {tensors[0], tensors[2]};
    CHECK_FALSE(compute_layout(lone, 3)->tables[0].whole());
}

TEST_CASE("a checkpoint's pieces tell how their table was placed", "[layout][placement]") {
    const RowTable table{1, 10, 4};
    CHECK(placement_from_pieces(table, {4, 3, 3}) == table);  // spread over 3
    auto whole = placement_from_pieces(table, {0, 10, 0});
    REQUIRE(whole);
    CHECK(whole->home == 1);
    CHECK(placement_from_pieces(table, {10}) == table);  // one shard: spread and whole are one
    CHECK_FALSE(placement_from_pieces(table, {5, 5, 0}));
    CHECK_FALSE(placement_from_pieces(table, {10, 10, 0}));
    CHECK_FALSE(placement_from_pieces(table, {0, 0, 0}));
    CHECK_FALSE(placement_from_pieces(table, {}));
}

TEST_CASE("whole tables train over sockets and restore exactly into any shard count", "[psd][placement][checkpoint]") {
    const std::string dir = psrun::test::make_temp_dir();
    std::vector<float> reference;
    {
        Cluster cluster(3, base_options(1));
        PsClient chief(cluster.client_options(0, model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(adam(0.01f), ramp(chief.layout().total, 0.5f)));
        for (int s = 0; s < 3; ++s) step(chief, s);
        // Each shard holds its share: the spread table's third and the whole tables at home.
        for (std::uint32_t s = 0; s < 3; ++s) {
            std::uint64_t floats = 0;
            for (const auto& t : chief.layout().tables) floats += t.rows_on(s, 3) * t.width;  // keyed: its slots
            auto stats = chief.stats(s);
            REQUIRE(stats);
            CHECK((*stats)["row_floats"].get<std::uint64_t>() == floats);
        }
        REQUIRE(chief.save(3, dir));
        for (int s = 3; s < 5; ++s) step(chief, s);  // the run goes on: the reference
        reference = everything(chief);
    }
    for (std::uint32_t shards : {3u, 2u, 4u, 1u}) {
        INFO("restored into " << shards << " shards");
        Cluster cluster(shards, base_options(1));
        PsClient chief(cluster.client_options(0, model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.restore(adam(0.01f, 0, 3), dir));
        for (int s = 3; s < 5; ++s) step(chief, s);
        const auto got = everything(chief);
        REQUIRE(got.size() == reference.size());
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < got.size(); ++i) mismatches += got[i] != reference[i];
        CHECK(mismatches == 0);
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("a shard without a slot of a whole keyed table saves and loads its standby file", "[psd][placement][shard]") {
    const auto tensors = model();
    const auto layout = *compute_layout(tensors, 3);
    const std::uint32_t home = layout.tables[4].home;
    const std::uint32_t other = (home + 1) % 3;
    const std::string dir = psrun::test::make_temp_dir();
    psd::ShardState a(layout, other, tensors);
    std::vector<std::vector<float>> init;
    for (auto id : a.slice_ids()) init.push_back(ramp(layout.slices[id].length, 0.5f));
    a.init(adam(0.01f), std::vector<std::span<const float>>(init.begin(), init.end()));
    CHECK(a.rows().local_rows(4) == 0);
    CHECK(a.rows().index(4) == nullptr);
    REQUIRE(a.save(dir + "/ps.shard"));
    psd::ShardState b(layout, other, tensors);
    REQUIRE(b.load(dir + "/ps.shard"));
    CHECK(b.rows().local_rows(4) == 0);
    std::filesystem::remove_all(dir);
}

}  // namespace table_placement_test
