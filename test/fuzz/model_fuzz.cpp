// libFuzzer target for model descriptions (workerd/nn/: parse_model_text and shape inference).
// Contract checked: never a crash or hang; an accepted model has consistent totals (the tensor
// list packs parameter_count floats), its output is [N, classes] floats (a graph loss: a scalar), every value per
// example is within kMaxTensorElements, a graph loss's heads are N x width float values (per
// position: N x width x d1 x ...) with an input after the first as targets, and its canonical architecture parses back
// to a model with the same hash and tensors. Built and run by test/fuzz/fuzz.sh model.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "workerd/nn/model_description.h"
#include "workerd/nn/model_summary.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::nn;
    const auto model = parse_model_text(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz");
    if (!model) {
        if (model.error().message.rfind("model fuzz: ", 0) != 0) __builtin_trap();
        return 0;
    }
    const auto tensors = parameter_tensors(*model);
    std::int64_t packed = 0;
    for (const auto& t : tensors) {
        if (t.offset != packed || t.size <= 0) __builtin_trap();
        packed += t.size;
    }
    if (packed != model->parameter_count || packed > kMaxTensorElements) __builtin_trap();
    for (const auto& node : model->nodes)
        for (const auto& info : node.output_info) {
            const auto elements = elements_per_example(info.dims);
            if (!elements || *elements > kMaxTensorElements || *elements < 1) __builtin_trap();
        }
    const ValueInfo& out = model->value(model->output);
    if (model->loss == LossKind::kGraph) {
        // The graph's own loss: a float scalar, its head (if any) N x classes.
        if (out.type != ElementType::kFloat || has_batch(out.dims) || elements_per_example(out.dims).value_or(0) != 1)
            __builtin_trap();
        if (!model->head.empty() && model->value(model->head).dims.back().value != model->classes) __builtin_trap();
        // Every head: N x width float scores of the model (a per-position head's N x width x
        // spatial...), its targets an input after the first.
        for (const auto& h : model->heads) {
            const ValueInfo& v = model->value(h.value);
            if (v.rank() != 2 + h.spatial.size() || v.dims[1].value != h.width || v.type != ElementType::kFloat)
                __builtin_trap();
            for (std::size_t i = 0; i < h.spatial.size(); ++i)
                if (v.dims[2 + i].value != h.spatial[i] || h.spatial[i] < 1) __builtin_trap();
            if (model->input_index(h.target) <= 0) __builtin_trap();
        }
        if (!model->head.empty() && model->head_index(model->head) < 0) __builtin_trap();
    } else if (out.rank() != 2 || out.dims[1].value != model->classes || out.type != ElementType::kFloat) {
        __builtin_trap();
    }
    const std::string canonical = canonical_architecture(*model).dump();
    const auto again = parse_model_text(canonical, "canonical");
    if (!again || architecture_hash(*again) != architecture_hash(*model)) __builtin_trap();
    if (again->heads.size() != model->heads.size()) __builtin_trap();
    const auto tensors_again = parameter_tensors(*again);
    if (tensors_again.size() != tensors.size()) __builtin_trap();
    for (std::size_t i = 0; i < tensors.size(); ++i)
        if (tensors_again[i].name != tensors[i].name || tensors_again[i].shape != tensors[i].shape) __builtin_trap();
    (void)summary_json(*model).dump();
    return 0;
}
