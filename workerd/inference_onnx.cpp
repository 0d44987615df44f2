// load_onnx_model (workerd/inference.h). This build has no ONNX importer yet
// (workerd/onnx/onnx_model.h is declared, its library lands with branch onnx).
#include "workerd/inference.h"

namespace psrun::worker {

Result<InferenceModel> load_onnx_model(const std::string& path) {
    return make_error(ErrorCode::kUnsupported,
                      "--onnx " + path + ": this psrun was built without the ONNX importer; use --model-dir D "
                                         "with the training run's model dir instead");
}

}  // namespace psrun::worker
