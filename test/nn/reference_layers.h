// Naive reference loops (double) for the engine's layers on plain NCHW / NC buffers: the
// forward output and the gradients w.r.t. the input and the parameters, straight from the
// definitions (TF SAME pads per side, NHWC flattening for dense). Slow; for tests only.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "workerd/nn/layer_spec.h"

namespace psrun::nn::test {

using V = std::vector<double>;

struct Dims {
    std::int64_t n, c, h, w;
    std::size_t at(std::int64_t b, std::int64_t ch, std::int64_t y, std::int64_t x) const {
        return static_cast<std::size_t>(((b * c + ch) * h + y) * w + x);
    }
};

// y: output; dx, dw, db: gradients for the output gradient dy.
struct RefResult {
    V y, dx, dw, db;
};

// conv2d (cross-correlation) with the parameters p = [w oihw, b]; relu: a fused ReLU.
RefResult conv_ref(const LayerSpec& s, std::int64_t n, const std::vector<float>& x, const std::vector<float>& p,
                   const std::vector<float>& dy, bool relu);
// max_pool (padding ignored) or avg_pool (divides by the elements inside the image): {y, dx}.
std::pair<V, V> pool_ref(const LayerSpec& s, std::int64_t n, const std::vector<float>& x, const std::vector<float>& dy);
// dense on an NCHW (or flat) input flattened in NHWC order, p = [w oi, b].
RefResult dense_ref(const LayerSpec& s, std::int64_t n, const std::vector<float>& x, const std::vector<float>& p,
                    const std::vector<float>& dy, bool relu);

}  // namespace psrun::nn::test
