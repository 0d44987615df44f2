// Naive reference loops (double) for the engine's layers on plain NCHW / NC buffers: the
// forward output and the gradients w.r.t. the input and the parameters, straight from the
// definitions (TF SAME pads per side, NHWC flattening for dense). Slow; for tests only.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "workerd/nn/model_description.h"

namespace psrun::nn::test {

using V = std::vector<double>;

struct Shape4 {
    std::int64_t n, c, h, w;
    std::size_t at(std::int64_t b, std::int64_t ch, std::int64_t y, std::int64_t x) const {
        return static_cast<std::size_t>(((b * c + ch) * h + y) * w + x);
    }
};

// y: output; dx, dw, db: gradients for the output gradient dy.
struct RefResult {
    V y, dx, dw, db;
};

// conv2d node (cross-correlation, groups, dilation) on input `in` with the parameters
// p = [w oihw, b]; relu: a fused ReLU.
RefResult conv_ref(const Node& node, const ValueInfo& in, std::int64_t n, const std::vector<float>& x,
                   const std::vector<float>& p, const std::vector<float>& dy, bool relu);
// A pool node: max ignores the padding, avg divides by the elements inside the image (or the
// whole window with count_include_pad): {y, dx}.
std::pair<V, V> pool_ref(const Node& node, const ValueInfo& in, std::int64_t n, const std::vector<float>& x,
                         const std::vector<float>& dy);
// A dense node on an NCHW (flattened in NHWC order) or [N, F] input, p = [w oi, b].
RefResult dense_ref(const Node& node, const ValueInfo& in, std::int64_t n, const std::vector<float>& x,
                    const std::vector<float>& p, const std::vector<float>& dy, bool relu);

}  // namespace psrun::nn::test
