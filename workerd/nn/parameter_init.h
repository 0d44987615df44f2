// Filling the flat tensor buffer of a ModelDescription (model_description.h: `tensors`, each at
// its offset) from the tensors' initializers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

#include "workerd/nn/model_description.h"

namespace psrun::nn {

// Fills `params` (size model.parameter_count) from the initializers. Tensor t draws from its
// own stream Rng(seed, t), so a tensor's values do not depend on the others. Kinds:
// truncated_normal: N(0, stddev^2) redrawn beyond 2 stddev (TF); normal; uniform(-l, l);
// glorot_uniform: l = sqrt(6 / (fan_in + fan_out)); he_normal: truncated_normal with stddev
// sqrt(2 / fan_in) (TF 1.x Keras, no 0.88 correction for the truncation as TF 2 applies);
// zeros; constant. Fans as initializer.h (by rank: 4-D conv weights, 2-D [out, in], else
// the first dim for both). Deterministic for a seed on every build.
// A model with initial_parameters (an ONNX import) is copied from them instead, seed unused;
// std::invalid_argument when their size is not parameter_count.
// REQUIRES: params.size() == model.parameter_count.
void initialize_parameters(const ModelDescription& model, std::uint64_t seed, std::span<float> params);

}  // namespace psrun::nn
