#include "workerd/onnx/model_loader.h"

#include <string>

#include "workerd/nn/zoo.h"
#include "workerd/onnx/onnx_model.h"

namespace psrun::onnx_io {

bool is_onnx_spec(std::string_view spec) {
    constexpr std::string_view suffix = ".onnx";
    return spec.size() > suffix.size() && spec.substr(spec.size() - suffix.size()) == suffix;
}

Result<nn::ModelDescription> load_any_model(std::string_view spec) {
    if (is_onnx_spec(spec)) return import_onnx_file(std::string(spec));
    return nn::load_model(spec);
}

}  // namespace psrun::onnx_io
