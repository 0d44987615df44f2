// load_onnx_model (workerd/inference.h): the ONNX importer (workerd/onnx/onnx_model.h) gives the
// description and, as its initial_parameters, the graph's initializers in the engine's layout.
#include "workerd/inference.h"

#include "workerd/onnx/onnx_model.h"

namespace psrun::worker {

Result<InferenceModel> load_onnx_model(const std::string& path) {
    PSRUN_TRY_ASSIGN(auto model, onnx_io::import_onnx_file(path));
    if (!model.initial_parameters ||
        model.initial_parameters->size() != static_cast<std::size_t>(model.parameter_count))
        return make_error(ErrorCode::kInvalidArgument,
                          "--onnx " + path + ": the graph does not hold every parameter of its model (" +
                              std::to_string(model.initial_parameters ? model.initial_parameters->size() : 0) + " of " +
                              std::to_string(model.parameter_count) +
                              " floats): export it with its weights (psrun export, or torch.onnx.export)");
    InferenceModel out;
    out.params = *model.initial_parameters;
    out.model = std::move(model);
    out.source = "ONNX file " + path;
    return out;
}

}  // namespace psrun::worker
