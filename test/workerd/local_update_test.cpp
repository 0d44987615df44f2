// The standalone update (workerd/local_update.h, Trainer::apply_gradients): the optimizer on
// trainable tensors, params -= grads on state tensors, whatever the chunks cut.
#include <catch2/catch.hpp>

#include <omp.h>

#include "workerd/local_update.h"

namespace psrun::worker {
namespace {
std::vector<float> ramp(std::size_t n, float scale, float offset = 0.0f) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = offset + scale * static_cast<float>(i % 89) / 89.0f;
    return v;
}
}  // namespace

TEST_CASE("state tensors get params -= grads, trainable ones the optimizer, in any chunking", "[trainer][state]") {
    omp_set_num_threads(2);
    // conv/w, bn/mean (state), bn/var (state, adjacent), fc/w, fc/b: chunk cuts land inside them.
    const std::vector<TensorInfo> tensors = {
        {"conv/w", {10, 100}, 0, 1000},
        {"bn/mean", {300}, 1000, 300, TensorClass::kState},
        {"bn/var", {300}, 1300, 300, TensorClass::kState},
        {"fc/w", {5, 70}, 1600, 350},
        {"fc/b", {5}, 1950, 5},
    };
    const std::size_t n = 1955;
    OptimizerConfig config{.kind = OptimizerKind::kAdam, .learning_rate = 1e-2f};
    config.schedule.warmup_steps = 3;
    const auto init = ramp(n, 0.5f, -0.25f);
    const std::vector<std::vector<float>> grads = {ramp(n, 0.3f), ramp(n, -0.6f, 0.1f), ramp(n, 0.9f, -0.4f)};

    std::vector<float> expected = init;
    Optimizer reference(config, n);  // element-wise: right for the trainable elements
    for (const auto& g : grads) reference.apply(expected, g);
    for (std::size_t i = 1000; i < 1600; ++i) {
        expected[i] = init[i];
        for (const auto& g : grads) expected[i] -= g[i];
    }
    for (int chunks : {1, 2, 3, 7}) {
        LocalUpdate update(config, tensors, chunks);
        std::vector<float> params = init;
        for (const auto& g : grads) update.apply(params, g);
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < n; ++i) mismatches += params[i] != expected[i];
        INFO("chunks " << chunks);
        CHECK(mismatches == 0);
    }
}

TEST_CASE("weight decay reaches the rank >= 2 tensors only, whatever the chunks cut", "[trainer][optimizer]") {
    omp_set_num_threads(2);
    const std::vector<TensorInfo> tensors = {
        {"fc/w", {10, 30}, 0, 300},
        {"fc/b", {30}, 300, 30},
        {"bn/mean", {30}, 330, 30, TensorClass::kState},
        {"out/w", {30, 3}, 360, 90},
    };
    const std::size_t n = 450;
    OptimizerConfig config{.kind = OptimizerKind::kNesterov, .learning_rate = 0.1f, .weight_decay = 0.05f};
    const auto init = ramp(n, 0.5f, -0.25f);
    const std::vector<std::vector<float>> grads = {ramp(n, 0.3f), ramp(n, -0.6f, 0.1f)};
    // Reference: one optimizer per tensor, decaying when its rank is >= 2; the state tensor by subtraction.
    std::vector<float> expected = init;
    for (const auto& t : tensors) {
        std::span<float> p(expected.data() + t.offset, t.size);
        Optimizer reference(config, t.size);
        for (const auto& g : grads) {
            std::span<const float> gt(g.data() + t.offset, t.size);
            if (t.tensor_class == TensorClass::kState)
                for (std::size_t i = 0; i < t.size; ++i) p[i] -= gt[i];
            else reference.apply(p, gt, t.shape.size() >= 2);
        }
    }
    for (int chunks : {1, 3, 7}) {
        LocalUpdate update(config, tensors, chunks);
        std::vector<float> params = init;
        for (const auto& g : grads) update.apply(params, g);
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < n; ++i) mismatches += params[i] != expected[i];
        INFO("chunks " << chunks);
        CHECK(mismatches == 0);
    }
    // The decay is there: without it fc/w ends elsewhere, fc/b where it ends with it.
    OptimizerConfig plain = config;
    plain.weight_decay = 0.0f;
    LocalUpdate update(plain, tensors, 1);
    std::vector<float> params = init;
    for (const auto& g : grads) update.apply(params, g);
    CHECK(params[10] != expected[10]);
    CHECK(params[310] == expected[310]);
}

TEST_CASE("lamb standalone: one trust ratio per whole tensor, bit for bit in any chunking",
          "[trainer][optimizer][lamb]") {
    omp_set_num_threads(3);
    // Tensors larger than a LAMB block (4096) and chunk cuts inside them; a state tensor between.
    const std::vector<TensorInfo> tensors = {
        {"conv/w", {10, 1000}, 0, 10000},
        {"conv/b", {10}, 10000, 10},
        {"bn/mean", {300}, 10010, 300, TensorClass::kState},
        {"fc/w", {50, 101}, 10310, 5050},
        {"fc/b", {5}, 15360, 5},
    };
    const std::size_t n = 15365;
    OptimizerConfig config{.kind = OptimizerKind::kLamb, .learning_rate = 1e-2f, .weight_decay = 0.05f};
    config.schedule.warmup_steps = 2;
    const auto init = ramp(n, 0.5f, -0.25f);
    const std::vector<std::vector<float>> grads = {ramp(n, 0.3f), ramp(n, -0.6f, 0.1f), ramp(n, 0.9f, -0.4f)};
    // Reference: one optimizer per tensor (for_tensor: decay on rank >= 2), the state tensor by subtraction.
    std::vector<float> expected = init;
    for (const auto& t : tensors) {
        std::span<float> p(expected.data() + t.offset, t.size);
        Optimizer reference(config.for_tensor(t.name, t.shape.size()), t.size);
        for (const auto& g : grads) {
            std::span<const float> gt(g.data() + t.offset, t.size);
            if (t.tensor_class == TensorClass::kState)
                for (std::size_t i = 0; i < t.size; ++i) p[i] -= gt[i];
            else reference.apply(p, gt, reference.config().weight_decay > 0.0f);
        }
    }
    for (int chunks : {1, 2, 3, 7}) {
        LocalUpdate update(config, tensors, chunks);
        std::vector<float> params = init;
        for (const auto& g : grads) update.apply(params, g);
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < n; ++i) mismatches += params[i] != expected[i];
        INFO("chunks " << chunks);
        CHECK(mismatches == 0);
    }
    // One optimizer over the whole buffer (one ratio for all tensors) lands elsewhere.
    std::vector<float> one = init;
    Optimizer all(config, n);
    for (const auto& g : grads) all.apply(one, g);
    CHECK(one[5] != expected[5]);
}

}  // namespace psrun::worker
