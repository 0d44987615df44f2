// What an ONNX Reduce* node says about its axes, read once for every importer of the family
// (reduce.cpp's ReduceMean/Sum/Max/Min, onnx_lowerings_reduce.cpp's ReduceL1/L2/SumSquare/LogSumExp).
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "workerd/nn/onnx_bridge.h"

namespace psrun::nn {

struct OnnxReduceAxes {
    std::vector<std::int64_t> axes;  // as written: empty when none were given
    bool noop_if_empty = false;      // noop_with_empty_axes=1 (only where axes are an input)
    bool keepdims = true;            // keepdims, default 1
};

// `axes_from_input`: the node's opset gives the axes as its second input (ReduceSum from 13, every
// Reduce* from 18), which must be a constant; otherwise the `axes` attribute. Errors: the node's
// refusal (axes computed at run time, a malformed attribute).
Result<OnnxReduceAxes> read_onnx_reduce_axes(OnnxNodeImport& node, bool axes_from_input);

}  // namespace psrun::nn
