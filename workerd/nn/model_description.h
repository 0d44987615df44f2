// A model as data: input shape, classes, ordered layers, loss, and optionally the recipe it was
// published with. parse_model() validates a JSON description (docs/models.md) and runs shape
// inference, so every accepted description has consistent shapes, unique layer names, sizes
// within kMaxTensorElements, and ends in `classes` flat features (the logits).
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/nn/layer_spec.h"
#include "workerd/nn/recipe.h"
#include "workerd/nn/shape.h"

namespace psrun::nn {

enum class LossReduction : std::uint8_t { kMean, kSum };

struct ModelDescription {
    std::string name;          // "name" (metadata; default: the source name)
    std::string description;   // one line (metadata)
    ActivationShape input;     // an image: channels x height x width
    std::int64_t classes = 0;
    std::vector<LayerSpec> layers;
    // Softmax cross-entropy of the logits; over the batch its mean (TF's reduce_mean) or sum.
    LossReduction reduction = LossReduction::kMean;
    std::optional<Recipe> recipe;
    // Initial values of every parameter tensor, flat in parameter_init.h's order and plain
    // layouts (a model imported from ONNX brings its initializers); null: draw them from the
    // layers' initializers. Not part of the architecture hash or the JSON form.
    std::shared_ptr<const std::vector<float>> initial_parameters;
    // Totals over the layers.
    std::int64_t parameter_count = 0;
    double flops = 0.0;        // forward, per example (layer_spec.h's convention)
};

// Largest accepted description text and layer count; beyond them a file is not a model.
inline constexpr std::size_t kMaxModelTextBytes = 1 << 20;
inline constexpr std::size_t kMaxLayers = 4096;

// `source_name` (a file name or built-in name) starts every error: "model F: ...".
Result<ModelDescription> parse_model(const nlohmann::json& document, std::string_view source_name);
// As above from text; a JSON syntax error names its line and column.
Result<ModelDescription> parse_model_text(std::string_view text, std::string_view source_name);

const char* to_string(LossReduction reduction);

}  // namespace psrun::nn
