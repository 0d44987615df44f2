// What the engine and the tools derive from a parsed description: the ordered parameter
// tensors, the canonical architecture JSON and its SHA-256, and a JSON summary (model show).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workerd/nn/model_description.h"

namespace psrun::nn {

struct TensorEntry {
    std::string name;                  // "<layer>/w", "<layer>/b"
    std::vector<std::int64_t> shape;   // plain layout (layer_spec.h)
    std::int64_t offset = 0;           // in floats from the start of one contiguous buffer
    std::int64_t size = 0;             // in floats
    bool state = false;                // a state tensor (common/tensor_layout.h TensorClass::kState)
};

// Every layer's parameters in layer order, weights before bias, packed without gaps. For
// mnist_deep this is exactly workerd/parameter_set.h's list.
std::vector<TensorEntry> parameter_tensors(const ModelDescription& model);

// The architecture, canonical: input, classes, loss and every layer with its kind, name and
// all options explicit (defaults filled in, kernels as [h, w], initializers as objects). Not
// the metadata (name, description) nor the recipe. Layer names are in: they name the tensors,
// so two models that differ only there cannot exchange checkpoints. Initializers and dropout
// are in too: workers that agree on the hash train the same thing.
nlohmann::json canonical_architecture(const ModelDescription& model);
// SHA-256 (64 lower-case hex digits) of canonical_architecture(model).dump(): keys sorted,
// no whitespace, numbers as nlohmann-json prints them (shortest round trip).
std::string architecture_hash(const ModelDescription& model);

// A description parse_model() reads back into the same model (same hash): the canonical
// architecture plus name, description and recipe. Checkpoints record it.
nlohmann::json model_json(const ModelDescription& model);

// Everything `psrun model show --json` prints: metadata, per-layer shapes, pads, parameters
// and MFLOP, totals, recipe, hash.
nlohmann::json summary_json(const ModelDescription& model);

}  // namespace psrun::nn
