// BufferPlan (workerd/nn/buffer_plan.h) alone, no oneDNN: buffers live at the same step never
// share bytes, buffers of disjoint lifetimes do, best fit, views extend a lifetime only where
// the bytes are free, the totals, the placement again with every buffer known and its replay;
// and a random sequence checked against the invariant.
#include <catch2/catch.hpp>

#include <vector>

#include "common/rng.h"
#include "workerd/nn/buffer_plan.h"

namespace psrun::nn::test {
namespace {

constexpr std::size_t kA = BufferPlan::kAlignment;

bool conflict(const BufferPlan::Buffer& a, const BufferPlan::Buffer& b) {
    const bool time = a.first <= b.last && b.first <= a.last;
    const bool bytes =
        a.offset < b.offset + BufferPlan::aligned(b.bytes) && b.offset < a.offset + BufferPlan::aligned(a.bytes);
    return time && bytes;
}

void check_no_conflict(const BufferPlan& plan) {
    for (std::size_t i = 0; i < plan.size(); ++i)
        for (std::size_t j = i + 1; j < plan.size(); ++j) {
            INFO("buffers " << i << " and " << j);
            CHECK_FALSE(conflict(plan.buffer(i), plan.buffer(j)));
        }
}

TEST_CASE("buffer plan: disjoint lifetimes share bytes, overlapping ones do not", "[buffer_plan]") {
    BufferPlan plan;
    const auto a = plan.place(100, 0, 4);  // 128 bytes aligned
    const auto b = plan.place(64, 2, 6);
    const auto c = plan.place(128, 5, 9);  // after a: a's bytes again
    CHECK(plan.buffer(a).offset == 0);
    CHECK(plan.buffer(b).offset == 2 * kA);
    CHECK(plan.buffer(c).offset == 0);
    CHECK(plan.arena_bytes() == 3 * kA);
    CHECK(plan.total_bytes() == 5 * kA);
    CHECK(plan.peak_live_bytes() == 3 * kA);  // steps 2-4: a and b; 5-6: b and c
    check_no_conflict(plan);
}

TEST_CASE("buffer plan: best fit takes the smallest gap that holds the buffer", "[buffer_plan]") {
    BufferPlan plan;
    plan.place(4 * kA, 0, 1);                 // [0, 4)   free after step 1
    plan.place(kA, 0, 9);                     // [4, 5)
    plan.place(2 * kA, 0, 1);                 // [5, 7)   free after step 1
    plan.place(kA, 0, 9);                     // [7, 8)
    const auto d = plan.place(2 * kA, 2, 3);  // both gaps hold it: the 2-slot one wins
    CHECK(plan.buffer(d).offset == 5 * kA);
    const auto e = plan.place(3 * kA, 2, 3);  // only the 4-slot gap
    CHECK(plan.buffer(e).offset == 0);
    const auto f = plan.place(2 * kA, 2, 3);  // no gap left: above all
    CHECK(plan.buffer(f).offset == 8 * kA);
    check_no_conflict(plan);
}

TEST_CASE("buffer plan: a view extends its buffer only into free steps", "[buffer_plan]") {
    BufferPlan plan;
    const auto a = plan.place(kA, 0, 2);
    const auto b = plan.place(kA, 3, 5);  // a's bytes, later
    CHECK(plan.buffer(b).offset == plan.buffer(a).offset);
    CHECK_FALSE(plan.extend(a, 3));
    CHECK(plan.buffer(a).last == 2);  // unchanged
    const auto c = plan.place(kA, 0, 1);
    CHECK(plan.extend(c, 8));
    CHECK(plan.extend(c, BufferPlan::kForever));
    CHECK(plan.buffer(c).last == BufferPlan::kForever);
    CHECK(plan.extend(c, 4));  // shorter: nothing to do
    CHECK(plan.find(plan.buffer(c).offset + 10, 1) == c);
    CHECK(plan.find(plan.buffer(a).offset, 4) == b);
    CHECK(plan.find(plan.buffer(a).offset, 9) == BufferPlan::kNone);
    check_no_conflict(plan);
}

TEST_CASE("buffer plan: placed again with every buffer known, largest first, then preset", "[buffer_plan]") {
    BufferPlan online;
    online.place(kA, 0, 1);      // a: [0, 1)
    online.place(kA, 0, 5);      // b: [1, 2)
    online.place(2 * kA, 2, 5);  // c: a's slot is too small: [2, 4)
    CHECK(online.arena_bytes() == 4 * kA);
    CHECK(online.peak_live_bytes() == 3 * kA);
    std::size_t bytes = 0;
    const auto offsets = online.offline_offsets(bytes);
    CHECK(bytes == 3 * kA);  // c first at 0, then b (longer-lived) above it, a under b's in time
    CHECK(offsets == std::vector<std::size_t>{0, 2 * kA, 0});
    BufferPlan again;
    again.preset(offsets);
    again.place(kA, 0, 1);
    again.place(kA, 0, 5);
    again.place(2 * kA, 2, 5);
    CHECK(again.arena_bytes() == 3 * kA);
    for (std::size_t i = 0; i < 3; ++i) CHECK(again.buffer(i).offset == offsets[i]);
    check_no_conflict(again);
    // A preset offset that would overlap a live buffer is not taken: best fit as without.
    BufferPlan wrong;
    wrong.preset({0, 0});
    wrong.place(kA, 0, 1);
    CHECK(wrong.buffer(wrong.place(kA, 1, 2)).offset == kA);
    check_no_conflict(wrong);
}

TEST_CASE("buffer plan: placed again, the order that needs the fewest bytes is kept", "[buffer_plan]") {
    // Largest first needs 9 units here (c and d at 0, a at 4, b at 3, then e finds no gap of 2
    // below 7); the longest-lived first (d, e, a, then c, b) reaches the peak, 8 units at step 3
    // (b, d, e).
    BufferPlan plan;
    plan.place(3 * kA, 5, 6);  // a
    plan.place(3 * kA, 3, 3);  // b
    plan.place(4 * kA, 6, 6);  // c
    plan.place(3 * kA, 0, 3);  // d
    plan.place(2 * kA, 3, 5);  // e
    CHECK(plan.peak_live_bytes() == 8 * kA);
    std::size_t bytes = 0;
    const auto offsets = plan.offline_offsets(bytes);
    CHECK(bytes == 8 * kA);
    BufferPlan replay;
    replay.preset(offsets);
    for (std::size_t i = 0; i < plan.size(); ++i)
        replay.place(plan.buffer(i).bytes, plan.buffer(i).first, plan.buffer(i).last);
    check_no_conflict(replay);
    CHECK(replay.arena_bytes() == 8 * kA);
}

TEST_CASE("buffer plan: bad buffers are refused", "[buffer_plan]") {
    BufferPlan plan;
    CHECK_THROWS_AS(plan.place(0, 0, 1), std::invalid_argument);
    CHECK_THROWS_AS(plan.place(8, 3, 2), std::invalid_argument);
    CHECK(plan.size() == 0);
}

TEST_CASE("buffer plan: random lifetimes never conflict and need at least the peak", "[buffer_plan]") {
    for (std::uint64_t seed = 1; seed <= 20; ++seed) {
        psrun::Rng rng(seed);
        BufferPlan plan;
        for (int i = 0; i < 200; ++i) {
            const int first = static_cast<int>(rng.below(100));
            const int last = first + static_cast<int>(rng.below(30));
            const auto id = plan.place(1 + rng.below(10000), first, last);
            if (rng.below(4) == 0) plan.extend(id, last + static_cast<int>(rng.below(20)));
        }
        INFO("seed " << seed);
        check_no_conflict(plan);
        CHECK(plan.arena_bytes() >= plan.peak_live_bytes());
        CHECK(plan.arena_bytes() < plan.total_bytes());
        // Placed again, then replayed with those offsets over the final lifetimes: still no
        // conflict, the arena offline_offsets said, never below the peak.
        std::size_t bytes = 0;
        const auto offsets = plan.offline_offsets(bytes);
        BufferPlan replay;
        replay.preset(offsets);
        for (std::size_t i = 0; i < plan.size(); ++i)
            replay.place(plan.buffer(i).bytes, plan.buffer(i).first, plan.buffer(i).last);
        check_no_conflict(replay);
        for (std::size_t i = 0; i < plan.size(); ++i) CHECK(replay.buffer(i).offset == offsets[i]);
        CHECK(replay.arena_bytes() == bytes);
        CHECK(bytes >= plan.peak_live_bytes());
    }
}

}  // namespace
}  // namespace psrun::nn::test
