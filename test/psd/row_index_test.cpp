// RowIndex (psd/row_index.h): admission by count and by probability, LRU eviction when full,
// the frequency gate of a full index, idle eviction by sweep(), checkpoint entries and their
// restore, and a long random sequence against a plain reference (std::map of ids, a list in update
// order). CountSketch (psd/count_sketch.h): never under-counts, ages.
#include <catch2/catch.hpp>

#include <list>
#include <map>
#include <random>
#include <set>
#include <stdexcept>

#include "psd/count_sketch.h"
#include "psd/row_index.h"

using psrun::psd::CountSketch;
using psrun::psd::RowIndex;

TEST_CASE("row index: an id is a row at its first occurrence by default", "[row_index]") {
    RowIndex index({.capacity = 4});
    CHECK(index.find(7) == RowIndex::kNone);
    const auto a = index.occur(0xFFFFFFFFFFFFFFF0ull, 1);  // ids are full 64-bit numbers
    CHECK(a.created);
    CHECK_FALSE(a.evicted);
    CHECK(index.find(0xFFFFFFFFFFFFFFF0ull) == a.slot);
    const auto again = index.occur(0xFFFFFFFFFFFFFFF0ull, 2);
    CHECK(again.slot == a.slot);
    CHECK_FALSE(again.created);
    CHECK(index.rows() == 1);
    CHECK(index.counters().admitted == 1);
    CHECK(index.counters().refused == 0);
}

TEST_CASE("row index: memory is the slots used and a compact map, about 27 bytes a row", "[row_index]") {
    // 20 bytes of slot (id, last update, neighbours) and the map's 5-byte buckets, 7/16 to 7/8 of
    // them full: at most 20 + 5 x 16 / 7 bytes a row once the map has grown a few times. The
    // absl::flat_hash_map of (id, slot) it replaced took 17 bytes a bucket on top of 24-byte slots.
    constexpr std::uint64_t kRows = 200000;
    RowIndex index({.capacity = 1u << 20});
    std::mt19937_64 rng(3);
    for (std::uint64_t i = 0; i < kRows; ++i) index.occur(rng(), i);
    REQUIRE(index.rows() == kRows);
    const double per_row = static_cast<double>(index.bytes()) / kRows;
    CHECK(per_row >= 20.0 + 5.0);
    CHECK(per_row <= 20.0 + 5.0 * 16 / 7 + 0.5);
    std::mt19937_64 again(3);
    for (std::uint64_t i = 0; i < kRows; ++i) REQUIRE(index.find(again()) == i);  // slots given in order
}

TEST_CASE("row index: admit_after N admits at the N-th occurrence", "[row_index]") {
    RowIndex index({.capacity = 100, .admit_after = 3});
    CHECK(index.occur(42, 1).slot == RowIndex::kNone);
    CHECK(index.occur(42, 2).slot == RowIndex::kNone);
    CHECK(index.occur(43, 2).slot == RowIndex::kNone);
    const auto third = index.occur(42, 3);
    CHECK(third.created);
    CHECK(third.slot != RowIndex::kNone);
    CHECK(index.find(43) == RowIndex::kNone);
    CHECK(index.counters().refused == 3);
    CHECK(index.counters().admitted == 1);
}

TEST_CASE("row index: admit_probability admits that share, the same way for the same calls", "[row_index]") {
    RowIndex a({.capacity = 100000, .admit_probability = 0.25, .seed = 9});
    RowIndex b({.capacity = 100000, .admit_probability = 0.25, .seed = 9});
    int admitted = 0, same = 0;
    for (std::uint64_t id = 0; id < 20000; ++id) {
        const bool in_a = a.occur(id * 0x9E3779B97F4A7C15ull, 1).slot != RowIndex::kNone;
        const bool in_b = b.occur(id * 0x9E3779B97F4A7C15ull, 1).slot != RowIndex::kNone;
        admitted += in_a;
        same += in_a == in_b;
    }
    CHECK(admitted > 4600);  // 5000 expected; 6 standard deviations is 367
    CHECK(admitted < 5400);
    CHECK(same == 20000);
    CHECK(a.counters().refused == 20000u - static_cast<std::uint64_t>(admitted));
}

TEST_CASE("row index: a full index evicts the least recently updated row", "[row_index]") {
    RowIndex index({.capacity = 3});
    const auto s1 = index.occur(1, 1).slot, s2 = index.occur(2, 2).slot, s3 = index.occur(3, 3).slot;
    CHECK(std::set<std::uint32_t>{s1, s2, s3}.size() == 3);
    index.updated(s1, 4);  // order by update: 2, 3, 1
    const auto four = index.occur(4, 5);
    CHECK(four.created);
    REQUIRE(four.evicted);
    CHECK(*four.evicted == 2);
    CHECK(four.slot == s2);  // its slot is reused
    CHECK(index.find(2) == RowIndex::kNone);
    CHECK(index.rows() == 3);
    const auto five = index.occur(5, 6);
    REQUIRE(five.evicted);
    CHECK(*five.evicted == 3);
    CHECK(index.counters().evicted_full == 2);
    CHECK(index.counters().admitted == 5);
}

TEST_CASE("row index: sweep evicts rows idle for more than evict_after updates", "[row_index]") {
    RowIndex index({.capacity = 10, .evict_after = 10});
    const auto s1 = index.occur(1, 1).slot;
    index.occur(2, 5);
    index.updated(s1, 6);  // 1's last update is 6 now: order 2 (5), 1 (6), then 3 (20)
    index.occur(3, 20);
    const auto gone = index.sweep(16);
    REQUIRE(gone.size() == 1);
    CHECK(gone[0].id == 2);
    CHECK(gone[0].last_update == 5);
    const auto more = index.sweep(17);
    REQUIRE(more.size() == 1);
    CHECK(more[0].id == 1);
    CHECK(index.sweep(30).empty());
    CHECK(index.rows() == 1);
    CHECK(index.counters().evicted_idle == 2);
    CHECK(RowIndex({.capacity = 10}).sweep(1000000).empty());  // evict_after 0: never
}

TEST_CASE("row index: entries restore the rows, their slots and their order", "[row_index]") {
    RowIndex index({.capacity = 5});
    for (std::uint64_t id = 10; id < 15; ++id) index.occur(id, id);
    index.updated(index.find(11), 20);
    index.sweep(0);
    const auto entries = index.entries();
    REQUIRE(entries.size() == 5);
    CHECK(entries.front().id == 10);
    CHECK(entries.back().id == 11);

    RowIndex copy({.capacity = 5});
    std::vector<RowIndex::Entry> shuffled(entries.rbegin(), entries.rend());
    copy.restore(shuffled);
    CHECK(copy.entries() == entries);
    for (const auto& e : entries) CHECK(copy.find(e.id) == e.slot);
    const auto next = copy.occur(99, 21);  // full: the oldest (10) goes, as in the original
    REQUIRE(next.evicted);
    CHECK(*next.evicted == 10);

    RowIndex bad({.capacity = 5});
    std::vector<RowIndex::Entry> twice_id{{.id = 1, .slot = 0}, {.id = 1, .slot = 1}};
    CHECK_THROWS_WITH(bad.restore(twice_id), Catch::Contains("the id is given twice"));
    std::vector<RowIndex::Entry> twice_slot{{.id = 1, .slot = 0}, {.id = 2, .slot = 0}};
    CHECK_THROWS_WITH(bad.restore(twice_slot), Catch::Contains("the slot is given twice"));
    std::vector<RowIndex::Entry> beyond{{.id = 1, .slot = 5}};
    CHECK_THROWS_WITH(bad.restore(beyond), Catch::Contains("beyond the capacity of 5 rows"));
    // A restore with a gap leaves the gap's slots free for new ids.
    std::vector<RowIndex::Entry> gap{{.id = 1, .slot = 3, .last_update = 1}};
    bad.restore(gap);
    std::set<std::uint32_t> slots{3};
    for (std::uint64_t id = 2; id < 6; ++id) slots.insert(bad.occur(id, 2).slot);
    CHECK(slots == std::set<std::uint32_t>{0, 1, 2, 3, 4});
}

TEST_CASE("row index: policies out of range are refused naming the field", "[row_index]") {
    CHECK_THROWS_WITH(RowIndex({.capacity = 0}), Catch::Contains("capacity 0"));
    CHECK_THROWS_WITH(RowIndex({.capacity = 1, .admit_after = 0}), Catch::Contains("admit_after 0"));
    CHECK_THROWS_WITH(RowIndex({.capacity = 1, .admit_probability = 0.0}), Catch::Contains("admit_probability"));
    CHECK_THROWS_WITH(RowIndex({.capacity = 1, .admit_probability = 1.5}), Catch::Contains("admit_probability"));
    CHECK_THROWS_AS(RowIndex({.capacity = 1, .admit_probability = std::nan("")}), std::invalid_argument);
    CHECK_THROWS_WITH(RowIndex({.capacity = 1, .evict_after = (1ull << 31) + 1}),
                      Catch::Contains("evict_after 2147483649"));
    CHECK_NOTHROW(RowIndex({.capacity = 1, .evict_after = 1ull << 31}));
}

TEST_CASE("row index: last updates past 32 bits keep their order, sweeps and values", "[row_index]") {
    // A slot keeps its last update as a 32-bit offset; steps beyond it move the base. A row
    // updated within 2^31 updates of the newest keeps its exact last update; an older one reads
    // as 2^31 updates before the newest, still in its place in the order.
    constexpr std::uint64_t k32 = 1ull << 32, k31 = 1ull << 31;
    RowIndex index({.capacity = 8, .evict_after = k31});
    index.occur(1, 5);
    index.occur(2, k32 - 3);
    index.occur(3, k32 + 10);               // beyond 32 bits of offset: a new base
    index.updated(index.find(2), 3 * k32);  // and again: 1 is now over 2^31 updates old
    index.occur(4, 3 * k32 + 7);
    const auto entries = index.entries();
    REQUIRE(entries.size() == 4);
    CHECK(entries[0].id == 1);
    CHECK(entries[1].id == 3);
    CHECK(entries[1].last_update == 3 * k32 - k31 + 1);  // clamped: 2^31 - 1 before the base's step
    CHECK(entries[2].id == 2);
    CHECK(entries[2].last_update == 3 * k32);
    CHECK(entries[3].id == 4);
    CHECK(entries[3].last_update == 3 * k32 + 7);
    CHECK(entries[0].last_update == entries[1].last_update);
    // evict_after 2^31: every row with last update < step - 2^31 goes, the exact ones kept.
    const auto gone = index.sweep(3 * k32 + k31 + 1);
    REQUIRE(gone.size() == 3);
    CHECK(gone[2].id == 2);
    CHECK(index.find(4) != RowIndex::kNone);
    // A restore of far-apart updates keeps the newest exactly and the order of all.
    RowIndex copy({.capacity = 8});
    std::vector<RowIndex::Entry> far{{.id = 7, .slot = 0, .last_update = 1},
                                     {.id = 8, .slot = 1, .last_update = 5 * k32},
                                     {.id = 9, .slot = 2, .last_update = 5 * k32 - 100}};
    copy.restore(far);
    const auto back = copy.entries();
    REQUIRE(back.size() == 3);
    CHECK(back[0].id == 7);
    CHECK(back[1].id == 9);
    CHECK(back[1].last_update == 5 * k32 - 100);
    CHECK(back[2].last_update == 5 * k32);
}

TEST_CASE("row index: a long random sequence matches a plain LRU reference", "[row_index]") {
    constexpr std::uint64_t kCapacity = 128;
    RowIndex index({.capacity = kCapacity, .evict_after = 300, .frequency_gate = false});
    std::map<std::uint64_t, std::uint64_t> last;  // reference: id -> last update
    std::list<std::uint64_t> order;               // ids, least recently updated first
    std::mt19937_64 rng(5);
    std::uint64_t step = 0;
    for (int op = 0; op < 20000; ++op) {
        step += rng() % 2;
        const std::uint64_t id = static_cast<std::uint64_t>(op / 2000) * 50 + rng() % 100;  // a drifting window
        const auto got = index.occur(id, step);
        REQUIRE(got.slot != RowIndex::kNone);
        if (last.count(id) == 0) {
            REQUIRE(got.created);
            if (last.size() == kCapacity) {
                REQUIRE(got.evicted);
                REQUIRE(*got.evicted == order.front());
                last.erase(order.front());
                order.pop_front();
            } else {
                REQUIRE_FALSE(got.evicted);
            }
            last[id] = step;
            order.push_back(id);
        } else if (rng() % 2) {  // a push of a row already there
            index.updated(got.slot, step);
            last[id] = step;
            order.remove(id);
            order.push_back(id);
        }
        if (op % 37 == 0) {
            for (const auto& e : index.sweep(step)) {
                REQUIRE(e.id == order.front());
                REQUIRE(last[e.id] + 300 < step);
                last.erase(e.id);
                order.pop_front();
            }
            REQUIRE((order.empty() || last[order.front()] + 300 >= step));
        }
        REQUIRE(index.rows() == last.size());
    }
    CHECK(index.counters().evicted_full > 100);  // both kinds of eviction were exercised
    CHECK(index.counters().evicted_idle > 10);
    std::vector<std::uint64_t> ids;
    for (const auto& e : index.entries()) ids.push_back(e.id);
    CHECK(ids == std::vector<std::uint64_t>(order.begin(), order.end()));
}

TEST_CASE("count sketch: estimates never under-count, and halve after age_after additions", "[row_index]") {
    CountSketch sketch(64, 0, 3);  // narrow: collisions are certain among 500 ids
    std::map<std::uint64_t, std::uint32_t> truth;
    std::mt19937_64 rng(1);
    for (int k = 0; k < 5000; ++k) {
        const std::uint64_t id = rng() % 500;
        const std::uint32_t got = sketch.add(id);
        REQUIRE(got >= ++truth[id]);
    }
    for (const auto& [id, count] : truth) REQUIRE(sketch.estimate(id) >= count);
    CountSketch exact(1 << 12, 0, 3);  // wide: these 3 ids do not collide
    for (int k = 0; k < 7; ++k) exact.add(11);
    exact.add(12);
    CHECK(exact.estimate(11) == 7);
    CHECK(exact.estimate(12) == 1);
    CHECK(exact.estimate(13) == 0);
    CountSketch ageing(1 << 12, 10, 3);
    for (int k = 0; k < 9; ++k) ageing.add(5);
    CHECK(ageing.estimate(5) == 9);
    ageing.add(6);  // the 10th addition halves every counter
    CHECK(ageing.halvings() == 1);
    CHECK(ageing.estimate(5) == 4);
    CHECK(ageing.estimate(6) == 0);
    ageing.clear();
    CHECK(ageing.estimate(5) == 0);
}

namespace {

// Pulls `id` and, when it is a row, pushes it (updated), as a training step does; true on a hit.
bool touch(RowIndex& index, std::uint64_t id, std::uint64_t step) {
    const auto got = index.occur(id, step);
    if (got.slot == RowIndex::kNone) return false;
    index.updated(got.slot, step);
    return !got.created;
}

}  // namespace

TEST_CASE("row index: a full index keeps its frequent ids (frequency gate), plain LRU cycles them out", "[row_index]") {
    // 50 hot ids, each seen every 100 occurrences, among a stream of ids seen once: a table of 60
    // rows holds the hot ones with the gate; without it every one-off id evicts the oldest row.
    auto run = [](bool gate) {
        RowIndex index({.capacity = 60, .frequency_gate = gate});
        std::uint64_t hits = 0, hot = 0, cold = 1000000;
        for (std::uint64_t step = 1; step <= 20000; ++step) {
            const std::uint64_t id = step % 2 ? hot++ % 50 : cold++;
            const bool hit = touch(index, id, step);
            if (step > 10000 && id < 50) hits += hit;
        }
        std::uint64_t hot_rows = 0;
        for (std::uint64_t id = 0; id < 50; ++id) hot_rows += index.find(id) != RowIndex::kNone;
        return std::tuple{hits, hot_rows, index.counters()};
    };
    const auto [gate_hits, gate_rows, gate_counters] = run(true);
    const auto [lru_hits, lru_rows, lru_counters] = run(false);
    CHECK(gate_rows == 50);
    CHECK(gate_hits == 5000);  // every hot occurrence of the second half found its row
    CHECK(gate_counters.refused_full > 9000);
    CHECK(gate_counters.evicted_full < 1000);
    CHECK(lru_hits < 100);  // 60 rows hold 30 steps of traffic; a hot id comes back every 100
    CHECK(lru_counters.refused_full == 0);
    CHECK(lru_counters.evicted_full > 9000);
}

TEST_CASE("row index: the gate's counts age, so a new hot set takes over a full index", "[row_index]") {
    RowIndex index({.capacity = 40});
    std::uint64_t step = 0;
    for (int k = 0; k < 40; ++k) touch(index, static_cast<std::uint64_t>(k), ++step);  // ids 0..39: full
    CHECK(index.gate() == nullptr);
    touch(index, 1000, ++step);  // one more: the gate starts counting
    REQUIRE(index.gate() != nullptr);
    for (int k = 0; k < 20000; ++k) touch(index, static_cast<std::uint64_t>(k % 40), ++step);
    for (std::uint64_t id = 0; id < 40; ++id) CHECK(index.find(id) != RowIndex::kNone);
    for (int k = 0; k < 20000; ++k) touch(index, 100 + static_cast<std::uint64_t>(k % 40), ++step);  // 100..139
    std::uint64_t new_rows = 0;
    for (std::uint64_t id = 100; id < 140; ++id) new_rows += index.find(id) != RowIndex::kNone;
    CHECK(new_rows == 40);
    CHECK(index.gate()->halvings() > 0);
    // A restore forgets the counts: the next id into the full index is admitted as at the first fill.
    const auto entries = index.entries();
    index.restore(entries);
    CHECK(index.gate() == nullptr);
    CHECK(index.occur(999, ++step).created);
}
