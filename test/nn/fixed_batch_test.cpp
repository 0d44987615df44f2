// The shapes a file of fixed batch size holds as constants, read back as batch-dependent ones
// (workerd/nn/ops/fixed_batch.h): Reshape targets whose one axis spans the batch, at batch 2 and
// at batch 1, the class token's Expand, and the targets that have no such reading.
#include <catch2/catch.hpp>

#include "workerd/nn/ops/fixed_batch.h"

namespace psrun::nn {
namespace {

const Dim N = Dim::batch_times(1);
Dim of(std::int64_t v) { return Dim::of(v); }

}  // namespace

TEST_CASE("fixed batch 2: the Reshape axis that spans the batch becomes a multiple of N", "[fixed_batch]") {
    // x.view(x.size(0), -1) as [2, -1], and as 0 (copy) with -1; the full shape written out.
    CHECK(reshape_target_at_fixed_batch({N, of(4), of(8)}, {of(2), of(-1)}, 2) == Dims{N, of(32)});
    CHECK(reshape_target_at_fixed_batch({N, of(4), of(8)}, {of(0), of(-1)}, 2) == Dims{N, of(32)});
    CHECK(reshape_target_at_fixed_batch({N, of(4), of(8)}, {of(2), of(8), of(4)}, 2) == Dims{N, of(8), of(4)});
    // nn.MultiheadAttention (sequence first): view(L, B * heads, d) and view(L * B, E).
    CHECK(reshape_target_at_fixed_batch({of(197), N, of(768)}, {of(197), of(24), of(64)}, 2) ==
          Dims{of(197), Dim::batch_times(12), of(64)});
    CHECK(reshape_target_at_fixed_batch({of(197), N, of(768)}, {of(394), of(768)}, 2) ==
          Dims{Dim::batch_times(197), of(768)});
    // Its output's transpose back, [L, b * heads, d] to [L * b, E]: the batch outside the heads.
    CHECK(reshape_target_at_fixed_batch({of(33), Dim::batch_times(2), of(4)}, {of(66), of(8)}, 2) ==
          Dims{Dim::batch_times(33), of(8)});
    // Two examples' 32 values as four rows of 16: two rows each.
    CHECK(reshape_target_at_fixed_batch({N, of(32)}, {of(4), of(16)}, 2) == Dims{Dim::batch_times(2), of(16)});
    // An axis of size 1 before the batch's.
    CHECK(reshape_target_at_fixed_batch({N, of(6)}, {of(1), of(2), of(6)}, 2) == Dims{of(1), N, of(6)});
    // No reading: the target mixes the examples' values, does not hold them, or the data has no
    // single batch axis N.
    CHECK_FALSE(reshape_target_at_fixed_batch({N, of(6)}, {of(3), of(4)}, 2));
    CHECK_FALSE(reshape_target_at_fixed_batch({N, of(6)}, {of(5), of(-1)}, 2));
    CHECK_FALSE(reshape_target_at_fixed_batch({N, of(6)}, {of(2), of(7)}, 2));
    CHECK_FALSE(reshape_target_at_fixed_batch({of(4), of(6)}, {of(2), of(12)}, 2));
    CHECK_FALSE(reshape_target_at_fixed_batch({N, of(6), N}, {of(2), of(-1)}, 2));
    CHECK_FALSE(reshape_target_at_fixed_batch({N, of(6)}, {of(2), of(-1), of(-1)}, 2));
    CHECK_FALSE(reshape_target_at_fixed_batch({N, of(6)}, {N, of(-1)}, 2));
    // Sizes past 2^50 (a damaged file): no reading, no overflow.
    const std::int64_t big = std::int64_t{1} << 40;
    CHECK_FALSE(reshape_target_at_fixed_batch({N, of(big)}, {of(2), of(-1)}, big));
    CHECK_FALSE(reshape_target_at_fixed_batch({N, of(8)}, {of(2), of(big), of(big)}, 2));
    CHECK_FALSE(reshape_target_at_fixed_batch({Dim::batch_times(big), of(8)}, {of(2), of(-1)}, big));
}

TEST_CASE("fixed batch 1: every reading exact at 1, torch's usual one first", "[fixed_batch]") {
    const auto readings = [](const Dims& data, const Dims& target) {
        return reshape_readings_at_batch_one(data, target);
    };
    // x.view(x.size(0), -1): the batch's own axis first.
    CHECK(reshape_target_at_fixed_batch({N, of(4), of(8)}, {of(1), of(-1)}, 1) == Dims{N, of(32)});
    CHECK(readings({N, of(4), of(8)}, {of(1), of(-1)}) ==
          std::vector<Dims>{{N, of(32)}, {of(1), Dim::batch_times(32)}});
    // nn.MultiheadAttention's view(L, 1 * heads, d) of [L, N, E]: the batch outside the heads
    // first, then inside L.
    CHECK(readings({of(197), N, of(768)}, {of(197), of(12), of(64)}) ==
          std::vector<Dims>{{of(197), Dim::batch_times(12), of(64)}, {Dim::batch_times(197), of(12), of(64)}});
    // Its view(L * 1, E) of [L, heads N, d]: inside L first, the features last.
    CHECK(readings({of(197), Dim::batch_times(12), of(64)}, {of(197), of(768)}) ==
          std::vector<Dims>{{Dim::batch_times(197), of(768)}, {of(197), Dim::batch_times(768)}});
    // A hand-written view(b, L, heads, d) and view(b * heads, L, d) of [N, heads, L, d].
    CHECK(readings({N, of(8), of(16)}, {of(1), of(8), of(2), of(8)}).front() == Dims{N, of(8), of(2), of(8)});
    CHECK(readings({N, of(2), of(8), of(8)}, {of(2), of(8), of(8)}).front() == Dims{Dim::batch_times(2), of(8), of(8)});
    // view(L, b, E) of [L * N, E]: the batch's own axis.
    CHECK(readings({Dim::batch_times(5), of(4)}, {of(5), of(1), of(4)}).front() == Dims{of(5), N, of(4)});
    // Targets that do not hold the data: no reading.
    CHECK(readings({N, of(4)}, {of(3), of(2)}).empty());
    CHECK(readings({N, of(4)}, {of(-1), of(-1)}).empty());
    CHECK(readings({of(4), of(4)}, {of(16)}).empty());  // no batch axis
    CHECK_FALSE(reshape_target_at_fixed_batch({N, of(4)}, {of(3), of(2)}, 1));
}

TEST_CASE("fixed batch: a class token's Expand to [B, 1, 1] broadcasts to the batch", "[fixed_batch]") {
    CHECK(expand_shape_at_fixed_batch({of(1), of(1), of(8)}, {of(2), of(1), of(1)}, 2) == Dims{N, of(1), of(1)});
    CHECK(expand_shape_at_fixed_batch({of(1), of(1), of(8)}, {of(1), of(1), of(1)}, 1) == Dims{N, of(1), of(1)});
    // At 1, every 1 over a data's 1 (or none): the first axis first, then by position.
    CHECK(expand_readings_at_batch_one({of(1), of(1), of(7)}, {of(1), of(1), of(7)}) ==
          std::vector<Dims>{{N, of(1), of(7)}, {of(1), N, of(7)}});
    CHECK(expand_readings_at_batch_one({of(7)}, {of(1), of(1), of(7)}) ==
          std::vector<Dims>{{N, of(1), of(7)}, {of(1), N, of(7)}});
    CHECK(expand_readings_at_batch_one({of(2), of(7)}, {of(1), of(2), of(7)}) == std::vector<Dims>{{N, of(2), of(7)}});
    CHECK(expand_readings_at_batch_one({of(1), of(7)}, {of(3), of(7)}).empty());
    CHECK(expand_readings_at_batch_one({N, of(7)}, {of(1), of(7)}).empty());
    CHECK_FALSE(expand_shape_at_fixed_batch({N, of(1), of(8)}, {of(2), of(1), of(1)}, 2));
    CHECK_FALSE(expand_shape_at_fixed_batch({of(1), of(1), of(8)}, {of(3), of(1), of(1)}, 2));
    CHECK_FALSE(expand_shape_at_fixed_batch({of(1), of(8)}, {of(2), of(8)}, 0));
    // An LSTM's learned initial state, expand(1, b, H): the batch on axis 1; [2, 2, 7] at b = 2 is
    // ambiguous, and at b = 1 only the leading axis is read.
    CHECK(expand_shape_at_fixed_batch({of(1), of(1), of(7)}, {of(1), of(2), of(7)}, 2) == Dims{of(1), N, of(7)});
    CHECK(expand_shape_at_fixed_batch({of(7)}, {of(1), of(2), of(7)}, 2) == Dims{of(1), N, of(7)});
    CHECK_FALSE(expand_shape_at_fixed_batch({of(1), of(1), of(7)}, {of(2), of(2), of(7)}, 2));
    CHECK_FALSE(expand_shape_at_fixed_batch({of(1), of(2), of(7)}, {of(1), of(2), of(7)}, 2));
}

TEST_CASE("fixed batch: a ConstantOfShape's one entry of the batch's size is N", "[fixed_batch]") {
    CHECK(fill_shape_at_fixed_batch({of(2), of(4), of(30)}, 2) == Dims{N, of(4), of(30)});
    CHECK(fill_shape_at_fixed_batch({of(1), of(3), of(7)}, 3) == Dims{of(1), N, of(7)});
    CHECK_FALSE(fill_shape_at_fixed_batch({of(2), of(2), of(7)}, 2));
    CHECK_FALSE(fill_shape_at_fixed_batch({of(4), of(7)}, 2));
    CHECK_FALSE(fill_shape_at_fixed_batch({of(1), of(7)}, 1));
    CHECK_FALSE(fill_shape_at_fixed_batch({of(2)}, 2));
}

}  // namespace psrun::nn
