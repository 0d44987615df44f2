// The table of operator kinds (op_schema.h): one line per kind or family. Adding a kind: its
// file in ops/ (schema and ONNX), its kernel beside it, a line here and a line in
// engine/kernel_registry.cpp.
#include <algorithm>

#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {


namespace {

const std::vector<const OpSchema*>& all_schemas() {
    static const std::vector<const OpSchema*> schemas = [] {
        std::vector<const OpSchema*> s = {
            &conv2d_schema(),  &conv_transpose_schema(), &resize_schema(), &max_pool_schema(), &avg_pool_schema(), &global_avg_pool_schema(),
            &global_max_pool_schema(), &dense_schema(), &dropout_schema(), &identity_schema(),
            &parameter_schema(), &constant_schema(), &reshape_schema(), &flatten_schema(), &squeeze_schema(),
            &unsqueeze_schema(), &transpose_schema(),
            &pow_schema(), &erf_schema(),
            &softmax_schema(), &log_softmax_schema(),
            &matmul_schema(),
            &concat_schema(), &split_schema(),
            &slice_schema(), &pad_schema(),
            &batch_norm_schema(), &layer_norm_schema(),
            &group_norm_schema(),
            &embedding_schema(), &gather_schema(), &lstm_schema(), &gru_schema(),
        };
        for (const auto* a : activation_schemas()) s.push_back(a);
        for (const auto* a : binary_schemas()) s.push_back(a);
        for (const auto* a : reduce_schemas()) s.push_back(a);
        s.push_back(&prelu_schema());
        s.push_back(&expand_schema());
        for (const auto* a : select_schemas()) s.push_back(a);
        for (const auto* a : mask_schemas()) s.push_back(a);
        std::sort(s.begin(), s.end(), [](const OpSchema* a, const OpSchema* b) { return a->kind < b->kind; });
        return s;
    }();
    return schemas;
}

}  // namespace

const OpSchema* find_op(std::string_view kind) {
    for (const auto* s : all_schemas())
        if (s->kind == kind) return s;
    return nullptr;
}

std::vector<std::string_view> op_kinds() {
    std::vector<std::string_view> kinds;
    for (const auto* s : all_schemas()) kinds.push_back(s->kind);
    return kinds;
}

const OpSchema* find_onnx_importer(std::string_view op_type) {
    for (const auto* s : all_schemas())
        for (const auto op : s->onnx_ops)
            if (op == op_type) return s;
    return nullptr;
}

}  // namespace psrun::nn
