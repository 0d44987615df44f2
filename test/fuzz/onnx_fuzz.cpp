// libFuzzer target for the ONNX importer (workerd/onnx/: import_onnx on untrusted bytes).
// Contract checked: never a crash or hang; every refusal starts "model fuzz: "; an accepted
// graph gives a description whose initial_parameters hold parameter_count floats, and
// exporting it (where every layer has an ONNX form) and importing the export gives the same
// architecture hash and parameters.
// Built and run by test/fuzz/fuzz.sh onnx.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "workerd/nn/model_summary.h"
#include "workerd/onnx/onnx_model.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun;
    const auto model = onnx_io::import_onnx(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    if (!model) {
        if (model.error().message.rfind("model fuzz: ", 0) != 0) __builtin_trap();
        return 0;
    }
    if (!model->initial_parameters ||
        static_cast<std::int64_t>(model->initial_parameters->size()) != model->parameter_count)
        __builtin_trap();
    const auto& params = *model->initial_parameters;
    const auto bytes = onnx_io::export_onnx(*model, params);
    if (!bytes) {
        if (bytes.error().code != ErrorCode::kUnsupported) __builtin_trap();
        return 0;
    }
    const auto again = onnx_io::import_onnx(*bytes, "again");
    if (!again || nn::architecture_hash(*again) != nn::architecture_hash(*model) || !again->initial_parameters ||
        again->initial_parameters->size() != params.size() ||
        (!params.empty() &&  // a graph without parameters has nothing to compare (and null data())
         std::memcmp(again->initial_parameters->data(), params.data(), params.size() * sizeof(float)) != 0))
        __builtin_trap();
    return 0;
}
