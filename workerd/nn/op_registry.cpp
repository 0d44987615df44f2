// The table of operator kinds (op_schema.h), expanded from ops/kinds.def: one line per kind.
// kernel_registry.cpp expands the same lines into the kernels' table.
#include <algorithm>
#include <stdexcept>
#include <string>

#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

// A kinds.def line's schema, checked against the line's kind: a schema function named on the
// wrong line is a bug in the list, reported at the first lookup rather than as a wrong kind.
const OpSchema* checked(std::string_view kind, const OpSchema& schema) {
    if (schema.kind != kind)
        throw std::logic_error("ops/kinds.def: kind \"" + std::string(kind) + "\" names the schema of \"" +
                               std::string(schema.kind) + "\"");
    return &schema;
}

const std::vector<const OpSchema*>& all_schemas() {
    static const std::vector<const OpSchema*> schemas = [] {
        std::vector<const OpSchema*> s = {
#define PSRUN_KIND(kind, schema, kernel) checked(kind, schema()),
#define PSRUN_FAMILY_KIND(kind, schema, kernel) checked(kind, schema(kind)),
#define PSRUN_FUSED_KERNEL(kernel)
#include "workerd/nn/ops/kinds.def"
#undef PSRUN_KIND
#undef PSRUN_FAMILY_KIND
#undef PSRUN_FUSED_KERNEL
        };
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
