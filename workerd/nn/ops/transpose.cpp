// transpose: {"kind": "transpose", "perm": [p0, p1, ...]}: output dim i is input dim p_i
// (ONNX's Transpose; PyTorch's permute; default: the dims reversed, as ONNX). No tensors.
// ONNX: Transpose.
#include <algorithm>
#include <numeric>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_transpose(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto perm, reader.integers("perm", std::nullopt, 0, 0, 5));
    auto sorted = perm;
    std::sort(sorted.begin(), sorted.end());
    for (std::size_t i = 0; i < sorted.size(); ++i)
        if (sorted[i] != static_cast<std::int64_t>(i))
            return tl::unexpected(
                reader.fail("perm", "expected a permutation of 0 .. rank-1, got " + describe_value(perm)));
    attrs["perm"] = perm;
    return {};
}

Result<void> infer_transpose(InferContext& context) {
    const ValueInfo& in = context.input(0);
    const auto perm = context.attr_ints("perm");
    if (perm.size() != in.rank())
        return tl::unexpected(op_error("perm has " + std::to_string(perm.size()) + " entries for an input of rank " +
                                       std::to_string(in.rank())));
    Dims out;
    for (const auto p : perm) out.push_back(in.dims[static_cast<std::size_t>(p)]);
    context.set_output(0, ValueInfo{out, in.type});
    context.add_flops(0);
    return {};
}

Result<void> import_transpose(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const ValueInfo* in = node.info(0);
    PSRUN_TRY_ASSIGN(auto perm, node.ints_attr("perm"));
    std::vector<std::int64_t> p;
    if (perm) {
        p = *perm;
    } else {
        if (in == nullptr) return tl::unexpected(node.refuse("the input's rank is unknown"));
        p.resize(in->rank());
        std::iota(p.rbegin(), p.rend(), 0);
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "transpose"}, {"inputs", {x}}, {"perm", p}}));
    node.bind_output(0, name);
    return {};
}

Result<void> export_transpose(OnnxNodeExport& out) {
    out.add("Transpose", {out.input(0)}, {out.output(0)},
            {{"perm", out.node().attrs.at("perm").get<std::vector<std::int64_t>>()}}, out.node().name);
    return {};
}

}  // namespace

const OpSchema& transpose_schema() {
    static const OpSchema s{"transpose",     1, 1, parse_transpose, infer_transpose, {"Transpose"}, import_transpose,
                            export_transpose};
    return s;
}

}  // namespace psrun::nn
