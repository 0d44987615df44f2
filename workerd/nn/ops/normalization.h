// What the normalisation kinds (batch_norm.cpp, layer_norm.cpp) share with their kernels
// (batch_norm_kernel.cpp, layer_norm_kernel.cpp) and with the fusion pass.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

// Where a normalisation node's slots are among its inputs (-1: the node has none).
struct NormSlots {
    int scale = -1, bias = -1, mean = -1, var = -1;
};
NormSlots norm_slots(const Node& node);

// layer_norm over the dims from `axis` of `input`: the axis made non-negative, and the values
// normalised together (features) per row. Errors without location.
struct LayerNormGeometry {
    std::size_t axis = 0;
    std::int64_t features = 1;
};
Result<LayerNormGeometry> layer_norm_geometry(const nlohmann::json& attrs, const ValueInfo& input);

// ONNX float attributes as the decimal a person wrote (1e-5f -> 1e-05, not 9.99999974e-06).
double onnx_float(float value);
// An ONNX BatchNormalization momentum (the weight of the old statistics) as PyTorch's (the
// batch's): 1 - m, rounded to 7 decimals so that 0.9f gives 0.1.
double onnx_momentum(float onnx_value);

}  // namespace psrun::nn
