// conv2d's options as the schema (conv.cpp) and the kernels (conv_kernel.cpp, conv_bn_kernel.cpp,
// conv_pool_kernel.cpp) read them.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/ops/window.h"

namespace psrun::nn {

struct ConvGeometry {
    int spatial = 2;  // 1: over N x C x L (the window has H = 1), 2: over N x C x H x W, 3: over N x C x D x H x W
    std::int64_t in_channels = 0;
    std::int64_t filters = 0;
    std::int64_t groups = 1;
    bool bias = true;
    Window2d window;
};

// From a conv2d node's attrs and its input (N x C x H x W, N x C x L with a 1-D kernel, or
// N x C x D x H x W with a 3-D one).
// Errors without location.
Result<ConvGeometry> conv_geometry(const nlohmann::json& attrs, const ValueInfo& input);

// The weights' dims: [O, I/G, KH, KW], [O, I/G, K] for a 1-D conv, [O, I/G, KD, KH, KW] for a
// 3-D one (PyTorch's and ONNX's).
std::vector<std::int64_t> conv_weight_dims(const ConvGeometry& g);

}  // namespace psrun::nn
