#include "common/tensor_layout.h"

#include <catch2/catch.hpp>

using namespace psrun;

TEST_CASE("mnist_deep has the model's 3,274,634 floats", "[layout]") {
    CHECK(total_elements(mnist_deep_tensors()) == 3274634);
}

TEST_CASE("layouts balance bytes across shards and cut fc1", "[layout]") {
    const auto tensors = mnist_deep_tensors();
    for (std::uint32_t k = 1; k <= 5; ++k) {
        auto layout = compute_layout(tensors, k);
        REQUIRE(layout);
        CHECK(validate_layout(*layout, tensors));
        const double ideal = 3274634.0 / k;
        for (std::uint32_t s = 0; s < k; ++s) {
            CHECK(layout->shard_size(s) > 0.99 * ideal - kMinSliceFloats);
            CHECK(layout->shard_size(s) < 1.01 * ideal + kMinSliceFloats);
        }
        // Deterministic: a second computation gives the same layout.
        CHECK(*compute_layout(tensors, k) == *layout);
        // Small tensors are never cut.
        for (const auto& s : layout->slices)
            if (tensors[s.tensor].elements() < kMinSliceFloats) CHECK(s.length == tensors[s.tensor].elements());
    }
    auto two = compute_layout(tensors, 2);
    int fc1_slices = 0;
    for (const auto& s : two->slices) fc1_slices += s.tensor == 4;
    CHECK(fc1_slices == 2);
}

TEST_CASE("bad layouts are refused", "[layout]") {
    const auto tensors = mnist_deep_tensors();
    CHECK_FALSE(compute_layout(tensors, 0));
    CHECK_FALSE(compute_layout({}, 2));
    CHECK_FALSE(compute_layout({{"empty", {0}}}, 1));
    auto layout = *compute_layout(tensors, 2);
    auto gap = layout;
    gap.slices.erase(gap.slices.begin() + 1);
    CHECK_FALSE(validate_layout(gap, tensors));
    auto wrong_shard = layout;
    wrong_shard.slices[0].shard = 7;
    CHECK_FALSE(validate_layout(wrong_shard, tensors));
    auto overlap = layout;
    overlap.slices[4].length += 1;
    CHECK_FALSE(validate_layout(overlap, tensors));
}
