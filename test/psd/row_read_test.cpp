// RowStore::read() (psd/row_store.h): what a checkpoint writes of a sparse table without
// materialize() equals, bit for bit, the arrays materialize() leaves (untouched rows' initial
// values, fresh slots, averages brought up to date), read in any pieces; it creates no row.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>

#include "psd/row_store.h"
#include "psd/shard_checkpoint_rows.h"

using namespace psrun;
using Part = psd::RowStore::Part;

namespace {

// One table of 301 x 3 rows (rows straddle every piece size below), on shard 1 of 2.
std::vector<TensorSpec> read_model() {
    std::vector<TensorSpec> t = {{"w", {4, 4}}, {"emb", {301, 3}}};
    t[1].kind = TensorKind::kRows;
    t[1].row_init = RowInit{RowInitKind::kNormal, 0.5f, 11};
    return t;
}

// Updates that push a few rows each, pulls that create others, and rows left untouched; with an
// average, most pushed rows' averages are left behind the table's update count.
void exercise(psd::RowStore& store) {
    for (std::uint32_t s = 0; s < 6; ++s) {
        store.begin_update();
        std::vector<std::uint32_t> ids{1, 3 + 8 * s, 131 + 2 * s};
        if (s == 2) ids.push_back(299);
        std::vector<float> grads(ids.size() * 3);
        for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = 0.1f * static_cast<float>(i + s) - 0.3f;
        store.apply(0, ids, grads);
        const std::vector<std::uint32_t> pulled{201 + 2 * s};
        std::vector<float> out(3);
        store.gather(0, pulled, out.data());
    }
}

std::span<const float> stored(const psd::RowStore& store, Part part) {
    switch (part) {
        case Part::kValues: return store.values(0);
        case Part::kSlot0: return store.slots(0).at(0);
        case Part::kSlot1: return store.slots(0).at(1);
        case Part::kAverage: return store.average(0);
    }
    return {};
}

}  // namespace

TEST_CASE("a table read for a checkpoint equals the materialized table, bit for bit, and creates nothing",
          "[psd][sparse][checkpoint]") {
    const auto model = read_model();
    const auto layout = *compute_layout(model, 2);
    auto config =
        GENERATE(OptimizerConfig{.kind = OptimizerKind::kAdagrad, .learning_rate = 0.1f, .adagrad_initial = 0.1f},
                 OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 0.01f},
                 OptimizerConfig{.kind = OptimizerKind::kMomentum, .learning_rate = 0.05f, .momentum = 0.9f});
    const bool average = GENERATE(false, true);
    if (average) config.ema_decay = 0.9f;
    INFO("optimizer " << static_cast<int>(config.kind) << (average ? " with an average" : ""));
    psd::RowStore materialized(layout, 1, model), read(layout, 1, model);
    for (auto* store : {&materialized, &read}) {
        store->init(config);
        exercise(*store);
    }
    const auto created = read.rows_created();
    REQUIRE(created > 0);
    REQUIRE(created < read.local_rows(0));  // untouched rows are left
    materialized.materialize(nullptr);
    REQUIRE(materialized.rows_created() == materialized.local_rows(0));

    std::vector<Part> parts{Part::kValues};
    for (std::size_t j = 0; j < read.slots(0).size(); ++j) parts.push_back(j == 0 ? Part::kSlot0 : Part::kSlot1);
    if (average) parts.push_back(Part::kAverage);
    for (const Part part : parts) {
        const auto expected = stored(materialized, part);
        for (const std::size_t piece : {std::size_t{1}, std::size_t{7}, std::size_t{64 * 3 + 1}, expected.size()}) {
            INFO("part " << static_cast<int>(part) << ", pieces of " << piece << " floats");
            std::vector<float> got(expected.size(), -1.0f);
            for (std::size_t first = 0; first < got.size(); first += piece)
                read.read(0, part, first, std::span<float>(got.data() + first, std::min(piece, got.size() - first)));
            CHECK(std::memcmp(got.data(), expected.data(), expected.size_bytes()) == 0);
        }
    }
    CHECK(read.rows_created() == created);  // nothing created by reading
}

namespace {

// Part `part` of table 0 read through `store`'s snapshot in pieces of `piece` floats (`floats` in
// all), `between(k)` called after the k-th piece.
template <class Between>
std::vector<float> read_snapshot_part(const psd::RowStore& store, Part part, std::size_t floats, std::size_t piece,
                                      Between&& between) {
    std::vector<float> got(floats, -1.0f);
    psd::RowStore::SnapshotCursor cursor;
    for (std::size_t first = 0; first < got.size(); first += piece) {
        store.read_snapshot(0, part, first, std::span<float>(got.data() + first, std::min(piece, got.size() - first)),
                            cursor);
        between(first / piece);
    }
    return got;
}

// More changes while a snapshot is read: pushes to rows read and not yet read, rows created by
// pulls and pushes, updates of the shard. Round r of several.
void change(psd::RowStore& store, std::uint32_t r) {
    auto own = [](std::uint32_t k) { return k % 150 * 2 + 1; };  // shard 1's rows: the odd ones below 301
    store.begin_update();
    std::vector<std::uint32_t> ids{own(0), own(2 + r), own(66 + 2 * r), own(140 + 7 * r)};
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    std::vector<float> grads(ids.size() * 3);
    for (std::size_t i = 0; i < grads.size(); ++i)
        grads[i] = 0.05f * static_cast<float>(i) - 0.2f * static_cast<float>(r % 7);
    store.apply(0, ids, grads);
    const std::vector<std::uint32_t> pulled{own(30 + r), own(131 + 3 * r)};
    std::vector<float> out(pulled.size() * 3);
    store.gather(0, pulled, out.data());
}

}  // namespace

TEST_CASE("a snapshot reads the table as it was, while the table goes on changing", "[psd][sparse][checkpoint]") {
    const auto model = read_model();
    const auto layout = *compute_layout(model, 2);
    auto config =
        GENERATE(OptimizerConfig{.kind = OptimizerKind::kAdagrad, .learning_rate = 0.1f, .adagrad_initial = 0.1f},
                 OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 0.01f});
    const bool average = GENERATE(false, true);
    if (average) config.ema_decay = 0.9f;
    const std::size_t piece = GENERATE(std::size_t{1}, std::size_t{7}, std::size_t{16 * 3 + 5}, std::size_t{4096});
    INFO("optimizer " << static_cast<int>(config.kind) << (average ? " with an average" : "") << ", pieces of " << piece
                      << " floats");
    // then: the table at the snapshot, materialized; snap: the same, read through a snapshot while
    // it changes; plain: the same changes without a snapshot.
    psd::RowStore then(layout, 1, model), snap(layout, 1, model), plain(layout, 1, model);
    for (auto* store : {&then, &snap, &plain}) {
        store->init(config);
        exercise(*store);
    }
    then.materialize(nullptr);
    snap.begin_snapshot();
    std::vector<Part> parts{Part::kValues};
    for (std::size_t j = 0; j < snap.slots(0).size(); ++j) parts.push_back(j == 0 ? Part::kSlot0 : Part::kSlot1);
    if (average) parts.push_back(Part::kAverage);
    std::uint32_t round = 0;
    for (const Part part : parts) {
        INFO("part " << static_cast<int>(part));
        const auto expected = stored(then, part);
        const auto got = read_snapshot_part(snap, part, expected.size(), piece, [&](std::size_t k) {
            if (k % 5 == 0) {  // a change every few pieces, in every part
                change(snap, round);
                change(plain, round);
                ++round;
            }
        });
        CHECK(std::memcmp(got.data(), expected.data(), expected.size_bytes()) == 0);
    }
    CHECK(round >= 2);
    CHECK(snap.snapshot_bytes() > 0);  // blocks were changed before they were read
    snap.end_snapshot();
    // The snapshot changed nothing the table holds: the same as without one.
    snap.materialize(nullptr);
    plain.materialize(nullptr);
    for (const Part part : parts) {
        const auto a = stored(snap, part), b = stored(plain, part);
        CHECK(std::memcmp(a.data(), b.data(), a.size_bytes()) == 0);
    }
}

namespace {

// A keyed table of 200 slots x 3 on one shard (rows evicted when full and when idle for 6 updates).
std::vector<TensorSpec> keyed_read_model() {
    std::vector<TensorSpec> t = {{"w", {4, 4}}, {"emb", {200, 3}}};
    t[1].kind = TensorKind::kKeyedRows;
    t[1].row_init = RowInit{RowInitKind::kNormal, 0.5f, 11};
    t[1].row_policy = RowPolicy{.evict_after = 6};
    return t;
}

// One update of the shard: 12 ids of 400 pulled (admitted, evicting when full) and pushed.
void keyed_step(psd::RowStore& store, std::uint32_t s) {
    store.begin_update();
    std::vector<std::uint64_t> keys;
    for (std::uint32_t i = 0; i < 12; ++i) keys.push_back((std::uint64_t{(i * 37 + s * 11) % 400} << 20) + 5);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    std::vector<float> out(keys.size() * 3), grads(keys.size() * 3);
    store.gather(0, keys, out.data());
    for (std::size_t i = 0; i < grads.size(); ++i) grads[i] = 0.03f * static_cast<float>(i % 7) - 0.1f;
    store.apply(0, keys, grads);
}

}  // namespace

TEST_CASE("a snapshot of a keyed table reads its rows and id map as they were, while rows come and go",
          "[psd][sparse][keyed][checkpoint]") {
    const auto model = keyed_read_model();
    const auto layout = *compute_layout(model, 1);
    auto config = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 0.01f};
    const bool average = GENERATE(false, true);
    if (average) config.ema_decay = 0.9f;
    const std::size_t piece = GENERATE(std::size_t{5}, std::size_t{16 * 3 * 2 + 1}, std::size_t{4096});
    INFO((average ? "with an average" : "without an average") << ", pieces of " << piece << " floats");
    psd::RowStore then(layout, 0, model), snap(layout, 0, model);
    for (auto* store : {&then, &snap}) {
        store->init(config);
        for (std::uint32_t s = 0; s < 40; ++s) keyed_step(*store, s);
    }
    then.catch_up_keyed();  // what a forked writer writes: the arrays, averages brought up to date
    auto entries = then.index(0)->entries();
    std::sort(entries.begin(), entries.end(), [](const auto& a, const auto& b) { return a.slot < b.slot; });
    const std::vector<float> keys_then = psd::encode_keyed_entries(entries);
    REQUIRE(entries.size() > 50);

    snap.begin_snapshot();
    const auto evicted_before = snap.index(0)->counters().evicted_idle + snap.index(0)->counters().evicted_full;
    std::uint32_t step = 40;
    std::vector<Part> parts{Part::kValues, Part::kSlot0, Part::kSlot1};
    if (average) parts.push_back(Part::kAverage);
    for (const Part part : parts) {
        INFO("part " << static_cast<int>(part));
        const auto expected = stored(then, part);
        const auto got = read_snapshot_part(snap, part, expected.size(), piece, [&](std::size_t k) {
            if (k % 3 == 0) keyed_step(snap, step++);
        });
        CHECK(std::memcmp(got.data(), expected.data(), expected.size_bytes()) == 0);
    }
    REQUIRE(snap.snapshot_rows(0) == entries.size());
    std::vector<float> keys(keys_then.size(), -1.0f);
    psd::RowStore::SnapshotCursor cursor;
    for (std::size_t first = 0; first < keys.size(); first += piece) {
        REQUIRE(snap.read_snapshot_keys(
            0, first, std::span<float>(keys.data() + first, std::min(piece, keys.size() - first)), cursor));
        keyed_step(snap, step++);
    }
    CHECK(keys == keys_then);
    // Rows were evicted and admitted while it was read: the snapshot kept them as they were.
    CHECK(snap.index(0)->counters().evicted_idle + snap.index(0)->counters().evicted_full > evicted_before);
    snap.end_snapshot();
}
