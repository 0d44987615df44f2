// The window slice and pad have in common: a strided block of a larger tensor, per dim its
// first index, step and count (slice reads it from its input, pad writes its input into it).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/tensor_shape.h"

namespace psrun::nn {

struct SliceWindow {
    std::vector<std::int64_t> start, step;
    Dims count;  // the window's dims (the batch dim passes through whole)
};

// The window of a tensor of `dims` that a slice node's attrs (axes, starts, ends, steps)
// select, starts and ends clamped as ONNX does (negative: from the end). Errors (no location):
// a repeated or out-of-range axis, the batch axis, a step below 1, an empty result.
Result<SliceWindow> slice_window(const Dims& dims, const nlohmann::json& attrs);

// The window of a pad node's output (of `dims` padded by `pads`: begins then ends, one per
// dim) that holds its input.
SliceWindow pad_window(const Dims& in_dims, const std::vector<std::int64_t>& pads);

}  // namespace psrun::nn
