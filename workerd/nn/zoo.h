// The built-in models (the JSON files in models/, embedded at build time by embed_models.py,
// so a binary needs no data files; `meson install` also puts the files in
// <datadir>/psrun/models as examples to copy), and loading a model by name or path.
#pragma once

#include <span>
#include <string_view>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

struct BuiltinModel {
    std::string_view name;  // the file name without ".json"
    std::string_view json;  // the file's text
};

// Sorted by name.
std::span<const BuiltinModel> builtin_models();

// `spec` is a built-in name, or a file path (contains '/' or ends in ".json"). Errors: unknown
// name (listing the built-ins; kNotFound), unreadable file (kIo), or the description's own.
Result<ModelDescription> load_model(std::string_view spec);

}  // namespace psrun::nn
