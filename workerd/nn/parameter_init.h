// Filling the flat tensor buffer of a ModelDescription (model_description.h: `tensors`, each at
// its offset) from the tensors' initializers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "common/tensor_layout.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

// Fills `params` (size model.parameter_count) from the initializers. Tensor t draws from its
// own stream Rng(seed, tensor_stream(t)), keyed by its name: a tensor's values do not depend on
// the others, nor on its place in the list (adding or removing a tensor leaves the others'
// initial values as they were; renaming one draws it anew). Kinds:
// truncated_normal: N(0, stddev^2) redrawn beyond 2 stddev (TF); normal; uniform(-l, l);
// glorot_uniform: l = sqrt(6 / (fan_in + fan_out)); he_normal: truncated_normal with stddev
// sqrt(2 / fan_in) (TF 1.x Keras, no 0.88 correction for the truncation as TF 2 applies);
// zeros; constant. Fans as initializer.h (by rank: 4-D conv weights, 2-D [out, in], else
// the first dim for both). Deterministic for a seed on every build.
// An embedding's table (a [V, D] tensor of an "embedding" node) is drawn row by row from
// table_row_init() instead, so that the table starts the same whether it lives in the dense
// buffer or as a sparse table on psd (row r's values are a function of seed, table and r only).
// A model with initial_parameters (an ONNX import) is copied from them instead, seed unused;
// std::invalid_argument when their size is not parameter_count.
// REQUIRES: params.size() == model.parameter_count.
void initialize_parameters(const ModelDescription& model, std::uint64_t seed, std::span<float> params);

// The stream a tensor's initial values are drawn from: FNV-1a of its name (common/fnv1a.h).
std::uint64_t tensor_stream(const TensorDef& t);

// Tensor `index` of the model (its initializer, its stream Rng(seed, tensor_stream)) into `out`
// (t.size floats), as initialize_parameters() does for every tensor.
void initialize_tensor(const ModelDescription& model, std::size_t index, std::uint64_t seed, std::span<float> out);

// The row initializer of tensor `index` when it is an embedding's table ([V, D], slot "table"
// of an "embedding" node): the table's initializer as a RowInit (normal, uniform, truncated
// normal, zeros; glorot_uniform and he_normal with the table's fans, as fill_tensor), seeded by
// (seed, the tensor's name). nullopt for any other tensor, or a constant initializer other than 0.
std::optional<RowInit> table_row_init(const ModelDescription& model, std::size_t index, std::uint64_t seed);

}  // namespace psrun::nn
