// ONNX model-local functions (ModelProto.functions) inlined into the main graph before the
// import. torch.onnx.export(..., export_modules_as_functions=...) writes one function per module
// class and a call node per module; exporters built on onnxscript write them too. Each call
// becomes the function's body: its formal inputs and outputs are renamed to the call's values
// (an optional input the call leaves out stays empty), the body's own values and nodes get names
// under the call's ("<call name>/<name>"), and an attribute that refers to one of the call's
// (ref_attr_name) takes the call's value, or is left out (its default) where the call has none.
// Calls inside a body are inlined in turn.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

// Deepest nesting of calls inlined (a function calling itself is refused at this depth).
inline constexpr int kMaxFunctionDepth = 16;

// Rewrites model's graph with every call of a model-local function inlined (a no-op without
// functions). `opset`: the model's default-domain opset. Errors (kInvalidArgument, naming the
// function and the call): a call with more inputs or outputs than the function declares, a
// function whose default-domain opset differs from `opset`, a body holding a subgraph (an If or
// Loop inside a function), calls nested deeper than kMaxFunctionDepth, more than kMaxNodes nodes
// once inlined.
Result<void> inline_functions(onnx::ModelProto& model, std::int64_t opset);

}  // namespace psrun::onnx_io
