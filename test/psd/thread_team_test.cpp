// psd's thread team: the split update and finite check equal the single-threaded ones exactly.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>
#include <vector>

#include "common/tensor_layout.h"
#include "common/thread_team.h"
#include "psd/shard_state.h"

using namespace psrun;
using namespace psrun::psd;

namespace thread_team_test {

namespace {

std::vector<float> ramp(std::size_t n, float scale) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.001f * static_cast<float>(i) + scale);
    return v;
}

}  // namespace

TEST_CASE("part_range covers [0, n) with 16-float aligned inner edges", "[psd][team]") {
    for (std::size_t n : {0ul, 1ul, 15ul, 17ul, 1000ul, 3212288ul}) {
        for (int parts : {1, 2, 3, 7}) {
            std::size_t expect = 0;
            for (int p = 0; p < parts; ++p) {
                const auto [b, e] = part_range(n, p, parts);
                REQUIRE(b == expect);
                REQUIRE(e >= b);
                if (p + 1 < parts) REQUIRE(e % 16 == 0);
                expect = e;
            }
            REQUIRE(expect == n);
        }
    }
}

TEST_CASE("a team runs every part once per call", "[psd][team]") {
    ThreadTeam team(3);
    REQUIRE(team.size() == 3);
    std::vector<int> hits(3, 0);
    for (int round = 0; round < 100; ++round) team.run([&](int part) { ++hits[static_cast<std::size_t>(part)]; });
    REQUIRE(hits == std::vector<int>{100, 100, 100});
}

TEST_CASE("Adam split across a team equals the single-threaded update bit for bit", "[psd][team]") {
    const auto tensors = mnist_deep_tensors();
    auto layout = compute_layout(tensors, 1);
    REQUIRE(layout);
    ShardState one(*layout, 0, tensors), split(*layout, 0, tensors);
    wire::InitConfig config;
    config.optimizer.kind = OptimizerKind::kAdam;
    config.optimizer.learning_rate = 1e-3f;
    std::vector<std::vector<float>> init, grads;
    std::vector<std::span<const float>> init_spans, grad_spans;
    for (auto id : one.slice_ids()) {
        const auto n = layout->slices[id].length;
        init.push_back(ramp(n, 0.1f));
        grads.push_back(ramp(n, 0.01f * static_cast<float>(id + 1)));
    }
    for (std::size_t k = 0; k < init.size(); ++k) {
        init_spans.emplace_back(init[k]);
        grad_spans.emplace_back(grads[k]);
    }
    one.init(config, init_spans);
    split.init(config, init_spans);
    ThreadTeam team(3);
    for (int step = 0; step < 3; ++step) {
        one.apply(grad_spans);
        split.apply(grad_spans, &team);
    }
    REQUIRE(split.step() == 3);
    for (std::size_t k = 0; k < init.size(); ++k) {
        const auto a = one.param_slice(k), b = split.param_slice(k);
        REQUIRE(std::equal(a.begin(), a.end(), b.begin()));
        REQUIRE(split.updates(k) == 3);
        const auto sa = one.slot_slices(k), sb = split.slot_slices(k);
        REQUIRE(sa.size() == 2);
        for (std::size_t s = 0; s < sa.size(); ++s) REQUIRE(std::equal(sa[s].begin(), sa[s].end(), sb[s].begin()));
    }
}

TEST_CASE("the split finite check finds a NaN or Inf in any part", "[psd][team]") {
    ThreadTeam team(2);
    std::vector<float> big(1 << 20, 1.0f), small(100, 2.0f);
    std::vector<std::span<const float>> spans{small, big};
    REQUIRE(all_finite(spans, &team));
    REQUIRE(all_finite(spans, nullptr));
    for (std::size_t where : {0ul, big.size() / 2 - 1, big.size() / 2 + 1, big.size() - 1}) {
        big[where] = std::numeric_limits<float>::quiet_NaN();
        CHECK_FALSE(all_finite(spans, &team));
        big[where] = -std::numeric_limits<float>::infinity();
        CHECK_FALSE(all_finite(spans, &team));
        big[where] = 1.0f;
    }
    small[99] = std::numeric_limits<float>::infinity();
    REQUIRE_FALSE(all_finite(spans, &team));
}

}  // namespace thread_team_test
