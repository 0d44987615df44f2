// conv_transpose's options as the schema (conv_transpose.cpp) and the kernel
// (conv_transpose_kernel.cpp) read them.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

// Per spatial axis (1: L, 2: H and W, 3: D, H and W), PyTorch's ConvTranspose: out = (in - 1) * stride
// - pad_begin - pad_end + dilation * (kernel - 1) + output_padding + 1.
struct ConvTransposeGeometry {
    int spatial = 2;
    std::int64_t in_channels = 0;
    std::int64_t filters = 0;
    std::int64_t groups = 1;
    bool bias = true;
    std::vector<std::int64_t> kernel, stride, dilation, pad_begin, pad_end, output_padding, in, out;
};

// From a conv_transpose node's attrs and its input (N x C x L, N x C x H x W or N x C x D x H x W, as the
// kernel's rank says). Errors without location.
Result<ConvTransposeGeometry> conv_transpose_geometry(const nlohmann::json& attrs, const ValueInfo& input);

// The weights' dims as PyTorch and ONNX store them: [I, O/G, (KD, KH,) KW].
std::vector<std::int64_t> conv_transpose_weight_dims(const ConvTransposeGeometry& g);

}  // namespace psrun::nn
