// The window slice and pad have in common: a strided block of a larger tensor, per dim its
// first index, step and count (slice reads it from its input, pad writes its input into it).
#pragma once

#include <cstdint>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/tensor_shape.h"

namespace psrun::nn {

class OnnxNodeImport;

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

// ONNX Pad (pad_import.cpp), opsets 2-18 with constant pads: mode "constant" with a constant
// value emits a pad layer; "reflect", "edge" and "wrap" a gather per padded axis; negative pads
// a slice first. Refuses (naming the node) what is unknown at import or would be empty.
Result<void> import_pad(OnnxNodeImport& node);

}  // namespace psrun::nn
