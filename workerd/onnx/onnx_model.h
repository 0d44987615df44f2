// ONNX in and out (docs/models.md "Exporting", "Importing from PyTorch"): a model description
// with its parameters as an ONNX inference graph, and an ONNX forward graph as PyTorch 1.13
// exports it back as a description the engine trains. Uses ONNX's protobuf schema as Debian
// ships it (libonnx-dev); thread-safe (no shared state).
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::onnx_io {

// A single-input image model's graph input is "images" [N, C, H, W] (N symbolic, f32, pixels
// as training reads them); any other model's inputs keep their names, in the model's order;
// its output "probabilities" [N, classes] is the softmax of the logits. Opset 13; dropout
// removed; node and initializer names from the description's layer names.
// `metadata` adds metadata_props entries after the description's (kDescriptionKey), e.g. the
// run's recipe under kRecipeKey.
// REQUIRES: params.size() == model.parameter_count.
Result<std::string> export_onnx(const nn::ModelDescription& model, std::span<const float> params,
                                const std::vector<std::pair<std::string, std::string>>& metadata = {});

// The metadata key under which `psrun export` keeps the run's <model-dir>/recipe.json
// ({"recipe": {...}}, workerd/run_recipe.h) when the model dir has one. import_onnx reads it back
// as the model's recipe (replacing the description's), refusing a damaged one.
inline constexpr const char* kRecipeKey = "psrun.recipe";

// The metadata key naming the float initializers that are constants, not parameters: a JSON
// list of names, e.g. ["pe", "rope.cos"]. torch.onnx writes a module's buffers
// (register_buffer: positional tables, rotary angles, fixed filters) as initializers exactly like
// its parameters, so without it the engine would train them; a listed initializer imports as a
// constant value (no gradient, never updated; at most 2^20 values). python/psrun_torch.py's
// export() writes it from the module's buffers. A damaged list, or a name that is no float
// initializer, is refused naming it.
inline constexpr const char* kFrozenKey = "psrun.frozen";

// Parses a serialized ModelProto. Every graph input that is no initializer is a model input,
// in the graph's order (the first is the primary). Success: a validated description (shape inference done)
// whose initial_parameters hold the graph's initializers in the engine's layout. Errors
// (kInvalidArgument, "model F: ..."): not ONNX, truncated, or a node the engine cannot train
// (naming the node, its op type and what is unsupported).
Result<nn::ModelDescription> import_onnx(std::string_view bytes, std::string_view source_name);
// As above from a file (kIo when unreadable).
Result<nn::ModelDescription> import_onnx_file(const std::string& path);

}  // namespace psrun::onnx_io
