// --optimizer lamb on psd's dense shards (psd/shard_state.h, common/lamb.h): one trust ratio per
// slice, so a tensor cut over two shards moves by each slice's rule, the same with or without a
// thread team splitting the update.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "common/tensor_layout.h"
#include "common/thread_team.h"
#include "psd/shard_state.h"

using namespace psrun;

namespace {

std::vector<float> lamb_wave(std::size_t n, float scale, float phase) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.013f * static_cast<float>(i % 7919) + phase);
    return v;
}

}  // namespace

TEST_CASE("lamb on 2 shards: each slice moves by its own trust ratio, with or without a team", "[psd][lamb]") {
    // big [500, 300] is cut between the shards; w and b are whole on one shard each.
    const std::vector<TensorSpec> tensors = {{"w", {100, 90}}, {"big", {500, 300}}, {"b", {10}}};
    const auto layout = *compute_layout(tensors, 2);
    int big_slices = 0;
    for (const auto& s : layout.slices) big_slices += s.tensor == 1;
    REQUIRE(big_slices == 2);
    const std::size_t n = layout.total;
    wire::InitConfig config;
    config.optimizer = OptimizerConfig{.kind = OptimizerKind::kLamb, .learning_rate = 0.01f, .weight_decay = 0.02f};
    const auto init = lamb_wave(n, 0.2f, 0.3f);
    std::vector<std::vector<float>> grads;
    for (int s = 0; s < 3; ++s) grads.push_back(lamb_wave(n, 0.05f, 1.0f + float(s)));

    // The rule per slice: one optimizer over the slice's floats, with its tensor's configuration.
    std::vector<float> expected = init;
    for (const auto& slice : layout.slices) {
        const TensorSpec& t = tensors[slice.tensor];
        Optimizer o(config.optimizer.for_tensor(t.name, t.shape.size()), slice.length);
        const std::span<float> p(expected.data() + slice.flat_offset, slice.length);
        for (const auto& g : grads)
            o.apply(p, std::span<const float>(g.data() + slice.flat_offset, slice.length),
                    o.config().weight_decay > 0.0f);
    }
    ThreadTeam team(3);
    for (ThreadTeam* with : {static_cast<ThreadTeam*>(nullptr), &team}) {
        INFO((with ? "3 threads" : "1 thread"));
        std::vector<float> got(n);
        for (std::uint32_t shard = 0; shard < 2; ++shard) {
            psd::ShardState state(layout, shard, tensors);
            REQUIRE(state.size() >= (1u << 16));  // large enough that a team splits it
            std::vector<std::span<const float>> params;
            for (auto id : state.slice_ids())
                params.emplace_back(init.data() + layout.slices[id].flat_offset, layout.slices[id].length);
            state.init(config, params);
            for (const auto& g : grads) {
                std::vector<std::span<const float>> slices;
                for (auto id : state.slice_ids())
                    slices.emplace_back(g.data() + layout.slices[id].flat_offset, layout.slices[id].length);
                state.apply(slices, with);
            }
            state.copy_params_to(got, nullptr);
            CHECK(state.slot_slices(0).size() == 2);  // m and v
        }
        CHECK(got == expected);
    }
    // Whole-tensor LAMB (one ratio for big, as a standalone worker computes it) lands elsewhere: the
    // per-slice ratio is an approximation where a tensor is cut.
    std::vector<float> whole(init.begin() + 9000, init.begin() + 9000 + 150000);
    Optimizer o(config.optimizer.for_tensor("big", 2), whole.size());
    for (const auto& g : grads) o.apply(whole, std::span<const float>(g.data() + 9000, whole.size()), true);
    CHECK(std::vector<float>(expected.begin() + 9000, expected.begin() + 159000) != whole);
}
