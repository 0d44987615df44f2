// Mean, sum, max, min or product over some axes of each example:
//   {"kind": "reduce_mean", "axes": [a...], "keepdims": true}, "reduce_sum", "reduce_max",
//   "reduce_min", "reduce_prod" (same fields; max and min pass the gradient to the arg max, split
//   evenly between equal values as torch.amax does; prod's gradient at an element is the product
//   of the others, exact where some are zero, as torch.prod's).
// `axes` required, each in [-rank, rank), distinct; with the batch dim among them the output has
// no batch axis: every axis reduced is a loss (a scalar, or all 1s with keepdims), some of them
// statistics of the batch (a batch norm written out, x - x.mean(0)) that broadcast back over it
// (in a data-parallel run, of each worker's batch, as batch_norm's);
// keepdims keeps each reduced axis as a 1 (ONNX's default) instead of dropping it. Floats only;
// no tensors. FLOPs: 1 per input element.
// ONNX: ReduceMean, ReduceSum, ReduceMax, ReduceMin, ReduceProd (of values not known at import:
// those fold, onnx_consts_reduce.cpp): the axes an attribute, or a constant input
// (ReduceSum from opset 13, all from 18), keepdims default 1; without axes (every axis, the
// batch's included: a loss's mean) reduces every axis unless noop_with_empty_axes=1 (then the
// input passes through). An
// integer input (a mask's count) is cast to floats first.
// Export (opset 13): ReduceSum's axes an input, the others' an attribute.
#include "workerd/nn/ops/reduce.h"
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_reduce(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axes, reader.integers("axes", std::nullopt, 0, -6, 5));
    PSRUN_TRY_ASSIGN(auto keep, reader.boolean("keepdims", true));
    attrs["axes"] = axes;
    attrs["keepdims"] = keep;
    return {};
}

Result<void> infer_reduce(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    auto axes = normal_axes(context.attr_ints("axes"), in.rank());
    if (!axes) return tl::unexpected(op_error(axes.error().message));
    const bool keep = context.attr_bool("keepdims");
    Dims out;
    std::size_t next = 0;
    for (std::size_t d = 0; d < in.rank(); ++d) {
        const bool reduced = next < axes->size() && (*axes)[next] == static_cast<std::int64_t>(d);
        if (!reduced) {
            out.push_back(in.dims[d]);
            continue;
        }
        ++next;
        if (keep) out.push_back(Dim::of(1));
    }
    context.set_output(0, ValueInfo{out, ElementType::kFloat});
    context.add_flops(static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

}  // namespace

Result<OnnxReduceAxes> read_onnx_reduce_axes(OnnxNodeImport& node, bool axes_from_input) {
    OnnxReduceAxes r;
    if (axes_from_input) {
        PSRUN_TRY_ASSIGN(auto noop, node.int_attr("noop_with_empty_axes", 0));
        r.noop_if_empty = noop != 0;
        if (node.input_count() > 1 && node.has_input(1)) {
            PSRUN_TRY_ASSIGN(auto given, node.constant_ints(1, "axes"));
            r.axes = std::move(given);
        }
    } else {
        PSRUN_TRY_ASSIGN(auto attr, node.ints_attr("axes"));
        if (attr) r.axes = *attr;
    }
    PSRUN_TRY_ASSIGN(auto keep, node.int_attr("keepdims", 1));
    r.keepdims = keep != 0;
    return r;
}

namespace {

Result<void> import_reduce(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const auto op = node.op_type();
    const bool sum = op == "ReduceSum";
    PSRUN_TRY_ASSIGN(auto read, read_onnx_reduce_axes(node, (sum && node.opset() >= 13) || node.opset() >= 18));
    std::vector<std::int64_t> axes = std::move(read.axes);
    if (axes.empty() && read.noop_if_empty) {
        node.bind_output(0, x);
        return {};
    }
    if (axes.empty()) {  // every axis, the batch's included: a loss's mean
        const ValueInfo* info = node.info(0);
        if (info == nullptr) return tl::unexpected(node.refuse("no axes, and the input's rank is unknown"));
        for (std::size_t d = 0; d < info->rank(); ++d) axes.push_back(static_cast<std::int64_t>(d));
    }
    const char* kind = sum                  ? "reduce_sum"
                       : op == "ReduceMax"  ? "reduce_max"
                       : op == "ReduceMin"  ? "reduce_min"
                       : op == "ReduceProd" ? "reduce_prod"
                                            : "reduce_mean";
    std::string source = x;
    const ValueInfo* info = node.info(0);
    const bool integers = info != nullptr && info->type == ElementType::kInt;
    if (integers) {
        // An integer mask counted (mask.sum(1)): summed as floats, exact below 2^24, and an integer
        // again as ONNX says (the count indexes: sparsemax's cumsum.gather(1, k - 1)).
        PSRUN_TRY_ASSIGN(auto cast, node.emit({{"kind", "cast"}, {"inputs", {x}}, {"to", "float"}}));
        source = cast;
    }
    PSRUN_TRY_ASSIGN(auto name,
                     node.emit({{"kind", kind}, {"inputs", {source}}, {"axes", axes}, {"keepdims", read.keepdims}}));
    if (integers && std::string_view(kind) != "reduce_mean") {
        PSRUN_TRY_ASSIGN(auto back, node.emit({{"kind", "cast"}, {"inputs", {name}}, {"to", "int"}}));
        name = back;
    }
    node.bind_output(0, name);
    return {};
}

Result<void> export_reduce(OnnxNodeExport& out) {
    const Node& node = out.node();
    const auto axes = node.attrs.at("axes").get<std::vector<std::int64_t>>();
    const std::int64_t keep = node.attrs.at("keepdims").get<bool>() ? 1 : 0;
    if (node.op == "reduce_sum")  // opset 13: the axes are an input
        out.add("ReduceSum", {out.input(0), out.int64_constant(node.name + "/axes", axes)}, {out.output(0)},
                {{"keepdims", keep}}, node.name);
    else
        out.add(node.op == "reduce_mean"   ? "ReduceMean"
                : node.op == "reduce_max"  ? "ReduceMax"
                : node.op == "reduce_prod" ? "ReduceProd"
                                           : "ReduceMin",
                {out.input(0)}, {out.output(0)}, {{"axes", axes}, {"keepdims", keep}}, node.name);
    return {};
}

OpSchema make(std::string_view kind, std::string_view onnx) {
    return OpSchema{kind, 1, 1, parse_reduce, infer_reduce, {onnx}, import_reduce, export_reduce};
}

}  // namespace

const OpSchema& reduce_schema(std::string_view kind) {
    static const std::vector<OpSchema> schemas = {make("reduce_mean", "ReduceMean"), make("reduce_sum", "ReduceSum"),
                                                  make("reduce_max", "ReduceMax"), make("reduce_min", "ReduceMin"),
                                                  make("reduce_prod", "ReduceProd")};
    return family_member(schemas, kind);
}

}  // namespace psrun::nn
