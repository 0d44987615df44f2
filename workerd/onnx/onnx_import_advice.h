// What the import tells a user about how a file was exported: warnings the model carries
// (nn::ModelDescription::import_warnings, printed by `model show`, `model check` and every
// workerd) where the file computes something other than the module it came from, and advice
// appended to a refusal. Pure functions of the file; no state.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "workerd/nn/model_description.h"
#include "workerd/onnx/onnx_consts.h"
#include "workerd/onnx/onnx_graph.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::onnx_io {

// Appends to model.import_warnings one warning each, where found: convolution weights the
// exporter folded (an eval-mode export's BatchNorm, weight_norm); other trained tensors the
// exporter computed from parameters (onnx::<Op>_<n>: a transposed weight, F.normalize(w));
// torch < 2.0's circular pads; BatchNorm momentum 0 (momentum=None); embedding padding rows.
void add_export_warnings(const onnx::ModelProto& proto, nn::ModelDescription& model);

// The batch size the graph's first input fixes (exported without dynamic_axes), 0 when its batch
// axis is symbolic (or it has none).
std::int64_t fixed_batch_size(const onnx::GraphProto& graph);
// For a refusal: what to do when the file's inputs have a fixed batch size, as " (...)"; empty
// when the batch axis is symbolic.
std::string fixed_batch_hint(const onnx::ModelProto& proto);
// For an import that succeeded: what psrun read a fixed batch size as (Reshape, nn::OnnxNodeImport::
// file_batch) and how to export without one; nullopt when the batch axis is symbolic.
// `other_readings`: the shapes of a batch of 1 read otherwise than first (onnx_importer.h,
// ReadingChoices).
std::optional<std::string> fixed_batch_warning(const onnx::ModelProto& proto, std::size_t other_readings = 0);

// A warning when node i, an integer Div evaluated at import with `inputs` known, truncates a
// negative inexact quotient (where a // b in PyTorch floors) and is not a floor division written
// out (Mod/Less/Mul around it); nullopt otherwise.
std::optional<std::string> truncating_division_warning(const GraphIndex& graph, int i,
                                                       const std::vector<const Known*>& inputs);

}  // namespace psrun::onnx_io
