// The model a --model option names, whatever its form: a built-in name or a FILE.json
// (nn::load_model) or a FILE.onnx (import_onnx_file, with the graph's initializers as the
// initial parameters). Every command that takes --model loads through this.
#pragma once

#include <string_view>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::onnx_io {

// True when `spec` names an ONNX file (ends in ".onnx").
bool is_onnx_spec(std::string_view spec);

// Errors as nn::load_model and import_onnx_file ("model F: ...").
Result<nn::ModelDescription> load_any_model(std::string_view spec);

}  // namespace psrun::onnx_io
