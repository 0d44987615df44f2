// The entry points of the operator kinds in this folder, declared from the one list of kinds
// (kinds.def): each kind's schema function (ops/<file>.cpp) and kernel factory
// (ops/<file>_kernel.cpp), as op_registry.cpp, kernel_registry.cpp and fusion.cpp use them.
// A kind shared by several lines (a family, a kernel of several kinds) is declared once per line:
// repeated declarations of one function are allowed.
#pragma once

#include <memory>
#include <string_view>

namespace psrun::nn {

struct OpSchema;
class Kernel;

#define PSRUN_KIND(kind, schema, kernel) \
    const OpSchema& schema();            \
    std::unique_ptr<Kernel> kernel();
#define PSRUN_FAMILY_KIND(kind, schema, kernel)    \
    const OpSchema& schema(std::string_view name); \
    std::unique_ptr<Kernel> kernel();
#define PSRUN_FUSED_KERNEL(kernel) std::unique_ptr<Kernel> kernel();
#include "workerd/nn/ops/kinds.def"
#undef PSRUN_KIND
#undef PSRUN_FAMILY_KIND
#undef PSRUN_FUSED_KERNEL

}  // namespace psrun::nn
