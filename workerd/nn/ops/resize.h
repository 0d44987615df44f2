// resize's output size as the schema (resize.cpp) and the kernel (resize_kernel.cpp) read it.
#pragma once

#include <cstdint>
#include <vector>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

class OnnxNodeImport;

// The output's spatial dims ({OL} or {OH, OW}) of a resize node over `input` (N x C x L or
// N x C x H x W): "sizes" as given, or floor(in * scale) per axis. Errors without location.
Result<std::vector<std::int64_t>> resize_out_dims(const nlohmann::json& attrs, const ValueInfo& input);

// ONNX Resize (resize_import.cpp): emits a resize layer with the sizes ONNX computes, or refuses
// (naming the node and the attribute) what oneDNN's resampling cannot compute.
Result<void> import_resize(OnnxNodeImport& node);

}  // namespace psrun::nn
