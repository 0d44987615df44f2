// The kernel of every operator kind, expanded from ops/kinds.def: the same lines as the schemas'
// table (op_registry.cpp), so a kind's kernel is keyed by the string its schema is.
#include <map>

#include "workerd/nn/fusion.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

using Factory = std::unique_ptr<Kernel> (*)();

const std::map<std::string, Factory>& factories() {
    static const std::map<std::string, Factory> table = {
#define PSRUN_KIND(kind, schema, kernel) {kind, kernel},
#define PSRUN_FAMILY_KIND(kind, schema, kernel) {kind, kernel},
#define PSRUN_FUSED_KERNEL(kernel)
#include "workerd/nn/ops/kinds.def"
#undef PSRUN_KIND
#undef PSRUN_FAMILY_KIND
#undef PSRUN_FUSED_KERNEL
    };
    return table;
}

}  // namespace

std::unique_ptr<Kernel> make_kernel(const std::string& kind) {
    const auto it = factories().find(kind);
    return it == factories().end() ? nullptr : it->second();
}

std::vector<std::string> kernel_kinds() {
    std::vector<std::string> kinds;
    for (const auto& [kind, factory] : factories()) kinds.push_back(kind);
    return kinds;
}

}  // namespace psrun::nn
