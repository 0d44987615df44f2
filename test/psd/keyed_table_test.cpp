// Tables keyed by raw 64-bit ids (TensorKind::kKeyedRows, docs/sparse.md "Raw ids"): the tensor
// list and WELCOME carry them, RowStore admits, drops and evicts by its RowIndex, psd serves them
// to PsClient over real sockets (8-byte id frames, keyed_owner() placement, STATS), and a
// checkpoint restores them into the same or another shard count.
#include <catch2/catch.hpp>

#include <algorithm>
#include <filesystem>
#include <future>
#include <map>

#include "common/row_init.h"
#include "common/wire.h"
#include "psd/row_store.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::sgd;

namespace keyed_table_test {

namespace {

constexpr std::uint32_t kCapacity = 600, kWidth = 4;

// A dense layer and one keyed table (tensor 1).
std::vector<TensorSpec> keyed_model(RowPolicy policy = {}, std::uint32_t capacity = kCapacity) {
    std::vector<TensorSpec> t = {{"fc/w", {16, 10}}, {"emb", {capacity, kWidth}}};
    t[1].kind = TensorKind::kKeyedRows;
    t[1].row_init = RowInit{RowInitKind::kUniform, 0.1f, 7};
    t[1].row_policy = policy;
    return t;
}

// Raw ids as recommenders see them: large, sparse, with fixed low bits.
std::uint64_t raw_id(std::uint64_t i) { return 0x9E3779B97F4A7C15ULL * (i + 1) << 8; }

std::vector<float> initial_row(std::uint64_t id) {
    std::vector<float> v(kWidth);
    fill_row(keyed_model()[1].row_init, id, v);
    return v;
}

// Pulls `keys` of the keyed table through `client`: one row of kWidth per key, in order.
std::vector<float> pull(PsClient& client, const std::vector<std::uint64_t>& keys) {
    const RowRequest request{.tensor = 1, .keys = keys};
    PulledRows rows;
    REQUIRE(client.exchange(Exchange{.pulls = {&request, 1}, .rows = &rows}));
    return {rows.rows(0).begin(), rows.rows(0).end()};
}

void push(PsClient& client, const std::vector<std::uint64_t>& keys, const std::vector<float>& grads,
          std::uint64_t step) {
    const RowGrads rows{.tensor = 1, .values = grads, .keys = keys};
    REQUIRE(client.exchange(
        Exchange{.grads = std::vector<float>(client.layout().total, 0.0f), .step = step, .row_grads = {&rows, 1}}));
}

}  // namespace

TEST_CASE("the tensor list, the layout and WELCOME carry a keyed table and its policy", "[psd][keyed]") {
    auto t = keyed_model(RowPolicy{.admit_after = 3, .admit_probability = 0.5f, .evict_after = 100});
    auto decoded = wire::decode_tensors(wire::encode_tensors(t));
    REQUIRE(decoded);
    CHECK(*decoded == t);
    CHECK((*decoded)[1].keyed());
    CHECK((*decoded)[1].rows());
    const auto layout = *compute_layout(t, 3);
    REQUIRE(layout.tables.size() == 1);
    CHECK(layout.tables[0].keyed);
    CHECK(layout.tables[0].rows_on(2, 3) == 200);  // each shard: ceil(capacity / K) slots
    CHECK(validate_layout(layout, t));
    auto welcome =
        wire::decode_welcome(wire::encode_welcome(wire::Welcome{.shard = 1, .layout = layout, .instance = 5}));
    REQUIRE(welcome);
    CHECK(welcome->layout == layout);
    // The policy is part of the model: another one is another tensor list.
    CHECK(tensors_fingerprint(t) != tensors_fingerprint(keyed_model(RowPolicy{.admit_after = 2})));
    CHECK(tensors_fingerprint(keyed_model()) != tensors_fingerprint(keyed_model(RowPolicy{}, kCapacity + 1)));
    // Policies out of range are refused by name.
    for (const auto& [policy, what] : {std::pair{RowPolicy{.admit_after = 0}, "admit_after"},
                                       std::pair{RowPolicy{.admit_after = 70000}, "admit_after"},
                                       std::pair{RowPolicy{.admit_probability = 0.0f}, "admit_probability"},
                                       std::pair{RowPolicy{.admit_probability = 1.5f}, "admit_probability"},
                                       std::pair{RowPolicy{.evict_after = kMaxEvictAfter + 1}, "evict_after"}}) {
        auto bad = wire::decode_tensors(wire::encode_tensors(keyed_model(policy)));
        REQUIRE_FALSE(bad);
        CHECK_THAT(bad.error().message, Catch::Contains(what) && Catch::Contains("emb"));
    }
    // Spread over shards: raw ids with fixed low bits still land on every shard.
    std::vector<int> per_shard(4);
    for (std::uint64_t i = 0; i < 4000; ++i) ++per_shard[keyed_owner(raw_id(i), 4)];
    for (int n : per_shard) CHECK(n > 850);
}

TEST_CASE("a keyed RowStore admits at the N-th pull, drops other gradients and evicts by LRU and idleness",
          "[psd][keyed]") {
    auto t = keyed_model(RowPolicy{.admit_after = 2, .evict_after = 3}, 4);  // 2 shards: 2 slots each
    t[0].shape = {2, 2};  // most of the model: the table stays spread (not placed whole on one shard)
    const auto layout = *compute_layout(t, 2);
    REQUIRE_FALSE(layout.tables[0].whole());
    psd::RowStore store(layout, 0, t);
    store.init(OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 0.5f});
    std::vector<std::uint64_t> mine;  // ids shard 0 owns
    for (std::uint64_t i = 0; mine.size() < 4; ++i)
        if (keyed_owner(raw_id(i), 2) == 0) mine.push_back(raw_id(i));
    const std::vector<float> grad(kWidth, 1.0f);
    std::vector<float> out(kWidth);
    const std::span<const std::uint64_t> a(&mine[0], 1), b(&mine[1], 1), c(&mine[2], 1);
    store.begin_update();
    store.gather(0, a, out.data());  // first occurrence: not a row yet, reads its initial values
    CHECK(out == initial_row(mine[0]));
    CHECK(store.index(0)->rows() == 0);
    store.apply(0, a, grad);  // dropped: not a row
    CHECK(store.dropped(0) == 1);
    store.gather(0, a, out.data());  // second: admitted
    CHECK(store.index(0)->rows() == 1);
    CHECK(out == initial_row(mine[0]));
    store.apply(0, a, grad);
    store.gather(0, a, out.data());
    for (std::uint32_t c2 = 0; c2 < kWidth; ++c2) CHECK(out[c2] == initial_row(mine[0])[c2] - 0.5f);
    CHECK(store.rows_created() == 1);
    // Two more ids: the table (2 slots here) evicts the least recently updated row, a.
    for (int k = 0; k < 2; ++k) store.gather(0, b, out.data());
    store.begin_update();
    store.apply(0, b, grad);
    for (int k = 0; k < 2; ++k) store.gather(0, c, out.data());
    CHECK(store.index(0)->rows() == 2);
    CHECK(store.index(0)->find(mine[0]) == psd::RowIndex::kNone);
    CHECK(store.index(0)->counters().evicted_full == 1);
    // a comes back as a fresh row: its initial values, not its trained ones.
    for (int k = 0; k < 2; ++k) store.gather(0, a, out.data());
    CHECK(out == initial_row(mine[0]));
    // Idle rows go after evict_after updates without a push.
    for (int k = 0; k < 4; ++k) store.begin_update();
    CHECK(store.index(0)->rows() == 0);
    CHECK(store.index(0)->counters().evicted_idle == 2);
    CHECK(store.rows_created() == 0);
}

TEST_CASE("psd serves a keyed table to PsClient: raw ids, SGD on the rows, STATS", "[psd][keyed]") {
    Cluster cluster(2, base_options(1));
    PsClient chief(cluster.client_options(0, keyed_model()));
    REQUIRE(chief.hello());
    REQUIRE(chief.init(sgd(0.5f), ramp(chief.layout().total, 1.0f)));
    std::vector<std::uint64_t> keys;
    for (std::uint64_t i = 0; i < 50; ++i) keys.push_back(raw_id(i * 7919));
    keys.push_back(keys[3]);  // a repeat: fetched once, gradients summed
    auto first = pull(chief, keys);
    for (std::size_t i = 0; i < keys.size(); ++i)
        for (std::uint32_t c = 0; c < kWidth; ++c) REQUIRE(first[i * kWidth + c] == initial_row(keys[i])[c]);
    std::vector<float> grads(keys.size() * kWidth);
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * static_cast<float>(i % 13);
    push(chief, keys, grads, 0);
    auto after = pull(chief, keys);
    for (std::size_t i = 0; i + 1 < keys.size(); ++i)
        for (std::uint32_t c = 0; c < kWidth; ++c) {
            float g = grads[i * kWidth + c];
            if (i == 3) g += grads[50 * kWidth + c];
            REQUIRE(after[i * kWidth + c] == Approx(initial_row(keys[i])[c] - 0.5f * g).margin(1e-6));
        }
    std::uint64_t rows = 0, admitted = 0;
    for (std::uint32_t s = 0; s < 2; ++s) {
        auto stats = chief.stats(s);
        REQUIRE(stats);
        const auto& table = (*stats)["keyed_tables"]["emb"];
        CHECK(table["capacity"] == 300);
        rows += table["rows"].get<std::uint64_t>();
        admitted += table["admitted"].get<std::uint64_t>();
        CHECK(table["gradients_dropped"] == 0);
    }
    CHECK(rows == 50);
    CHECK(admitted == 50);
    // Ids in the wrong field are refused before anything is sent.
    const std::vector<std::uint32_t> ids{1, 2};
    const RowRequest wrong{.tensor = 1, .ids = ids};
    PulledRows out;
    auto refused = chief.exchange(Exchange{.pulls = {&wrong, 1}, .rows = &out});
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("keyed by raw 64-bit ids"));
}

TEST_CASE("a checkpoint restores a keyed table into the same or another shard count", "[psd][keyed][checkpoint]") {
    const std::string dir = psrun::test::make_temp_dir();
    std::vector<std::uint64_t> keys;
    for (std::uint64_t i = 0; i < 120; ++i) keys.push_back(raw_id(i * 31));
    std::vector<float> reference;
    const auto adam = [](std::uint64_t start) {
        wire::InitConfig c;
        c.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 0.01f};
        c.start_step = start;
        return c;
    };
    {
        Cluster cluster(2, base_options(1));
        PsClient chief(cluster.client_options(0, keyed_model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(adam(0), ramp(chief.layout().total, 0.5f)));
        for (int s = 0; s < 3; ++s) {
            pull(chief, keys);
            push(chief, keys, ramp(keys.size() * kWidth, 0.1f * static_cast<float>(s + 1), -0.03f), s);
        }
        REQUIRE(chief.save(3, dir));
        push(chief, keys, ramp(keys.size() * kWidth, 0.4f, -0.03f), 3);  // the run goes on: the reference
        reference = pull(chief, keys);
    }
    for (std::uint32_t shards : {2u, 3u, 1u}) {
        INFO("restored into " << shards << " shards");
        Cluster cluster(shards, base_options(1));
        PsClient chief(cluster.client_options(0, keyed_model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.restore(adam(3), dir));
        push(chief, keys, ramp(keys.size() * kWidth, 0.4f, -0.03f), 3);
        const auto got = pull(chief, keys);
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < got.size(); ++i) mismatches += got[i] != reference[i];
        CHECK(mismatches == 0);
        std::uint64_t rows = 0;
        for (std::uint32_t s = 0; s < shards; ++s)
            rows += (*chief.stats(s))["keyed_tables"]["emb"]["rows"].get<std::uint64_t>();
        CHECK(rows == keys.size());
    }
    // Another capacity is another model: refused, naming the table.
    {
        Cluster cluster(1, base_options(1));
        PsClient chief(cluster.client_options(0, keyed_model({}, 60)));
        REQUIRE(chief.hello());
        auto restored = chief.restore(adam(3), dir);
        REQUIRE_FALSE(restored);
        CHECK_THAT(restored.error().message, Catch::Contains("emb"));
    }
    std::filesystem::remove_all(dir);
}

TEST_CASE("the standby shard file keeps a keyed table's rows and id map", "[psd][keyed][shard]") {
    const auto tensors = keyed_model();
    const auto layout = *compute_layout(tensors, 2);
    const std::string dir = psrun::test::make_temp_dir();
    const std::string path = dir + "/ps-1.shard";
    std::vector<std::uint64_t> keys;  // ids shard 1 owns, ascending (as row frames bring them)
    for (std::uint64_t i = 0; keys.size() < 40; ++i)
        if (keyed_owner(raw_id(i), 2) == 1) keys.push_back(raw_id(i));
    std::sort(keys.begin(), keys.end());
    const auto grads = ramp(keys.size() * kWidth, 0.3f, -0.1f);
    psd::ShardState a(layout, 1, tensors);
    wire::InitConfig config;
    config.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 1e-2f};
    std::vector<std::vector<float>> init;
    for (auto id : a.slice_ids()) init.push_back(ramp(layout.slices[id].length, 0.5f));
    std::vector<std::span<const float>> init_spans(init.begin(), init.end());
    a.init(config, init_spans);
    std::vector<float> pulled(keys.size() * kWidth);
    a.rows().gather(0, keys, pulled.data());  // admitted at the first pull
    const psd::RowSlice rows{0, {}, grads, keys};
    std::vector<std::vector<float>> zeros;
    for (auto id : a.slice_ids()) zeros.emplace_back(layout.slices[id].length, 0.0f);
    std::vector<std::span<const float>> zero_spans(zeros.begin(), zeros.end());
    a.apply(zero_spans, nullptr, {}, {&rows, 1});
    REQUIRE(a.save(path));

    psd::ShardState b(layout, 1, tensors);
    REQUIRE(b.load(path));
    REQUIRE(b.rows().index(0)->rows() == keys.size());
    a.apply(zero_spans, nullptr, {}, {&rows, 1});  // one more Adam step on both: equal only if slots and t came back
    b.apply(zero_spans, nullptr, {}, {&rows, 1});
    std::vector<float> from_a(keys.size() * kWidth), from_b(keys.size() * kWidth);
    a.rows().gather(0, keys, from_a.data());
    b.rows().gather(0, keys, from_b.data());
    CHECK(from_a == from_b);
    CHECK(from_b != pulled);
    std::filesystem::remove_all(dir);
}

TEST_CASE("sync mode averages a keyed table's rows over the replicas", "[psd][keyed]") {
    auto o = base_options(2);
    o.sync = true;
    o.replicas_to_aggregate = 2;
    Cluster cluster(2, o);
    PsClient chief(cluster.client_options(0, keyed_model()));
    PsClient worker(cluster.client_options(1, keyed_model()));
    REQUIRE(chief.hello());
    REQUIRE(worker.hello());
    REQUIRE(chief.init(sgd(0.5f), ramp(chief.layout().total, 1.0f)));
    const std::vector<std::uint64_t> a{raw_id(1), raw_id(2), raw_id(3)}, b{raw_id(3), raw_id(4)};
    pull(chief, a);
    pull(worker, b);
    const auto ga = ramp(a.size() * kWidth, 0.2f, 0.1f), gb = ramp(b.size() * kWidth, -0.4f, 0.3f);
    auto first = std::async(std::launch::async, [&] { push(chief, a, ga, 0); });
    push(worker, b, gb, 0);
    first.get();
    const auto got = pull(chief, {raw_id(1), raw_id(3), raw_id(4)});
    for (std::uint32_t c = 0; c < kWidth; ++c) {
        // A replica that did not push a row counts as a zero gradient for it (as the dense average does).
        CHECK(got[c] == Approx(initial_row(raw_id(1))[c] - 0.5f * ga[c] / 2).margin(1e-6));
        CHECK(got[kWidth + c] ==
              Approx(initial_row(raw_id(3))[c] - 0.5f * (ga[2 * kWidth + c] + gb[c]) / 2).margin(1e-6));
        CHECK(got[2 * kWidth + c] == Approx(initial_row(raw_id(4))[c] - 0.5f * gb[kWidth + c] / 2).margin(1e-6));
    }
}

TEST_CASE("a lookup pull (an evaluation's) reads rows without creating, counting, admitting or evicting",
          "[psd][keyed]") {
    // Over real sockets, a keyed table that admits at the 2nd pull.
    Cluster cluster(2, base_options(1));
    PsClient chief(cluster.client_options(0, keyed_model(RowPolicy{.admit_after = 2})));
    REQUIRE(chief.hello());
    REQUIRE(chief.init(sgd(0.5f), ramp(chief.layout().total, 1.0f)));
    auto lookup = [&](const std::vector<std::uint64_t>& keys) {
        const RowRequest request{.tensor = 1, .keys = keys};
        PulledRows rows;
        REQUIRE(chief.exchange(Exchange{.pulls = {&request, 1}, .rows = &rows, .lookup = true}));
        return std::vector<float>(rows.rows(0).begin(), rows.rows(0).end());
    };
    auto totals = [&] {
        std::map<std::string, std::uint64_t> sum;
        for (std::uint32_t s = 0; s < 2; ++s) {
            auto stats = chief.stats(s);
            REQUIRE(stats);
            for (const char* key : {"rows", "admitted", "refused", "evicted_full"})
                sum[key] += (*stats)["keyed_tables"]["emb"][key].get<std::uint64_t>();
        }
        return sum;
    };
    std::vector<std::uint64_t> trained, unseen;
    for (std::uint64_t i = 0; i < 40; ++i) trained.push_back(raw_id(i));
    for (std::uint64_t i = 1000; i < 1040; ++i) unseen.push_back(raw_id(i));
    for (int k = 0; k < 3; ++k) lookup(trained);  // never counted: no admission however often
    auto none = totals();
    CHECK(none["rows"] == 0);
    CHECK(none["refused"] == 0);
    pull(chief, trained);  // counted twice: rows now
    pull(chief, trained);
    std::vector<float> grads(trained.size() * kWidth, 0.1f);
    push(chief, trained, grads, 0);
    const auto before = totals();
    CHECK(before.at("rows") == 40);
    auto both = trained;
    both.insert(both.end(), unseen.begin(), unseen.end());
    const auto got = lookup(both);
    const auto trained_now = pull(chief, trained);  // the ordinary pull's values are the lookup's
    for (std::size_t i = 0; i < trained.size() * kWidth; ++i) REQUIRE(got[i] == trained_now[i]);
    for (std::size_t i = 0; i < unseen.size(); ++i)
        for (std::uint32_t c = 0; c < kWidth; ++c)
            REQUIRE(got[(trained.size() + i) * kWidth + c] == initial_row(unseen[i])[c]);
    for (int k = 0; k < 3; ++k) lookup(unseen);
    const auto after = totals();
    CHECK(after == before);  // nothing admitted, refused or evicted by the lookups
    // A lookup pushes nothing: refused before anything is sent.
    const RowGrads rows{.tensor = 1, .values = grads, .keys = trained};
    auto refused = chief.exchange(
        Exchange{.grads = std::vector<float>(chief.layout().total, 0.0f), .row_grads = {&rows, 1}, .lookup = true});
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("lookup"));

    // A vocabulary table: a lookup of rows never pushed reads their initial values, creating none.
    std::vector<TensorSpec> vocab = {{"emb", {64, kWidth}}};
    vocab[0].kind = TensorKind::kRows;
    vocab[0].row_init = RowInit{RowInitKind::kUniform, 0.1f, 7};
    const auto layout = *compute_layout(vocab, 2);
    psd::RowStore store(layout, 1, vocab);
    store.init(OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 0.5f});
    const std::vector<std::uint32_t> ids{1, 3, 5};  // shard 1 of 2 owns the odd ids
    std::vector<float> read(ids.size() * kWidth), created(ids.size() * kWidth);
    store.gather(0, ids, read.data(), true);
    CHECK(store.rows_created() == 0);
    store.gather(0, ids, created.data());
    CHECK(store.rows_created() == 3);
    CHECK(read == created);
}

}  // namespace keyed_table_test
