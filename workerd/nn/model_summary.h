// What the engine and the tools derive from a parsed description: the ordered tensors, the
// canonical architecture JSON and its SHA-256, and a JSON summary (model show).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workerd/nn/model_description.h"

namespace psrun::nn {

struct TensorEntry {
    std::string name;  // "<layer>/w", "<layer>/b", or the name a file gave
    std::vector<std::int64_t> shape;
    std::int64_t offset = 0;  // in floats from the start of one contiguous buffer
    std::int64_t size = 0;    // in floats
    TensorClass cls = TensorClass::kTrainable;
};

// Every tensor in buffer order (the order layers created them: weights before bias), packed
// without gaps. For mnist_deep this is exactly workerd/parameter_set.h's list.
std::vector<TensorEntry> parameter_tensors(const ModelDescription& model);

// The architecture, canonical: the input (one: "input" as format 1 wrote it, so single-input
// hashes never change; several: "inputs", each {"name", "dims", "type"}), classes (or targets), loss and every layer
// with its kind, name and all its options explicit (defaults filled in, kernels as [h, w], initializers as objects;
// options added after format 1 only when set), its "inputs" only where they are not the previous layer's output, its
// "tensors" only where a slot binds another name than "<layer>/<slot>", and "output" only where it is not the last
// layer's. Not the metadata (name, description) nor the recipe. Layer names are in: they name the tensors, so two
// models that differ only there cannot exchange checkpoints. Initializers and dropout are in too: workers that agree on
// the hash train the same thing.
nlohmann::json canonical_architecture(const ModelDescription& model);
// SHA-256 (64 lower-case hex digits) of canonical_architecture(model).dump(): keys sorted,
// no whitespace, numbers as nlohmann-json prints them (shortest round trip).
std::string architecture_hash(const ModelDescription& model);

// A description parse_model() reads back into the same model (same hash): the canonical
// architecture plus name, description and recipe. Checkpoints record it.
nlohmann::json model_json(const ModelDescription& model);

// Everything `psrun model show --json` prints: metadata, per-layer inputs, shapes, tensors
// (with their class) and MFLOP, totals, recipe, hash.
nlohmann::json summary_json(const ModelDescription& model);

// Shapes for people: the dims after a leading batch axis ("32x28x28", "1024"), or all dims
// with N spelt out when the batch is elsewhere ("28xNx64"). [N] alone is "scalar per example"
// (an int label input, a per-example loss); no dims at all, "scalar" (a graph loss).
std::string shape_text(const Dims& dims);

}  // namespace psrun::nn
