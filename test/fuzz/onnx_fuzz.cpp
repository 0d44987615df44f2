// libFuzzer target for the ONNX importer (workerd/onnx/: import_onnx on untrusted bytes).
// Contract checked: never a crash or hang; every refusal starts "model fuzz: "; an accepted
// graph gives a description whose initial_parameters hold parameter_count floats, and
// exporting it (where every layer has an ONNX form) and importing the export gives the same
// architecture hash and parameters. An accepted graph with a float initializer also goes
// through `psrun model freeze` of that initializer (onnx_freeze.h): the result imports or is
// refused, never a crash.
// Built and run by test/fuzz/fuzz.sh onnx.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string_view>

#include "workerd/nn/model_summary.h"
#include "workerd/onnx/onnx_freeze.h"
#include "workerd/onnx/onnx_model.h"

namespace {

// Freezes the graph's first float initializer and imports the result.
void freeze_first(std::string_view bytes) {
    using namespace psrun;
    onnx::ModelProto proto;
    if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) __builtin_trap();  // it imported
    for (const auto& t : proto.graph().initializer()) {
        if (t.data_type() != onnx::TensorProto::FLOAT) continue;
        if (!onnx_io::freeze_initializers(proto, {t.name()})) return;  // a damaged list already there
        std::string out;
        if (!proto.SerializeToString(&out)) __builtin_trap();
        const auto frozen = onnx_io::import_onnx(out, "frozen");
        if (!frozen && frozen.error().message.rfind("model frozen: ", 0) != 0) __builtin_trap();
        return;
    }
}

}  // namespace

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
    freeze_first(std::string_view(reinterpret_cast<const char*>(data), size));
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
