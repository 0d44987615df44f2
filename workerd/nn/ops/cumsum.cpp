// Running sums along one axis of each example:
//   {"kind": "cumsum", "axis": a, "exclusive": false, "reverse": false}: y[..., j, ...] = the sum
//     of x[..., i, ...] for i <= j (exclusive: i < j; reverse: i >= j, or i > j exclusive), as
//     torch.cumsum and ONNX's CumSum. The axis may be negative (from the end; canonical form: as
//     given) and cannot be the batch axis.
// Floats or integers in, the same type out: integer sums are exact (position ids computed from a
// padding mask, `(ids != pad).cumsum(1)`, feed an embedding); float ones accumulate in f32 and
// their gradient is the running sum of dY the other way round. No tensors. FLOPs: 1 per element.
// ONNX: CumSum with a constant axis.
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_cumsum(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axis, reader.integer("axis", std::nullopt, -6, 5));
    PSRUN_TRY_ASSIGN(auto exclusive, reader.boolean("exclusive", false));
    PSRUN_TRY_ASSIGN(auto reverse, reader.boolean("reverse", false));
    attrs["axis"] = axis;
    attrs["exclusive"] = exclusive;
    attrs["reverse"] = reverse;
    return {};
}

Result<void> infer_cumsum(InferContext& context) {
    const ValueInfo& in = context.input(0);
    const auto rank = static_cast<std::int64_t>(in.rank());
    const std::int64_t given = context.attr_int("axis");
    const std::int64_t axis = given < 0 ? given + rank : given;
    if (axis < 0 || axis >= rank)
        return tl::unexpected(
            op_error("axis " + std::to_string(given) + " is outside the input's " + std::to_string(rank) + " dims"));
    if (in.dims[static_cast<std::size_t>(axis)].batch)
        return tl::unexpected(op_error("axis " + std::to_string(given) + " of " + to_string(in.dims) +
                                       " is the batch axis; sum along a dim of each example"));
    context.set_output(0, ValueInfo{in.dims, in.type});
    context.add_flops(static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

Result<void> import_cumsum(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const auto axis = node.ints(1);
    if (!axis || axis->size() != 1)
        return tl::unexpected(node.refuse("its axis must be a constant scalar (known at import)"));
    PSRUN_TRY_ASSIGN(auto exclusive, node.int_attr("exclusive", 0));
    PSRUN_TRY_ASSIGN(auto reverse, node.int_attr("reverse", 0));
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "cumsum"},
                                           {"inputs", {x}},
                                           {"axis", (*axis)[0]},
                                           {"exclusive", exclusive != 0},
                                           {"reverse", reverse != 0}}));
    node.bind_output(0, name);
    return {};
}

Result<void> export_cumsum(OnnxNodeExport& out) {
    const Node& node = out.node();
    // CumSum's axis is a 0-D tensor: a one-element initializer squeezed.
    const std::string one = out.int64_constant(node.name + "/axis", {node.attrs.at("axis").get<std::int64_t>()});
    const std::string axis = out.fresh(node.name + "/axis_scalar");
    out.add("Squeeze", {one, out.int64_constant(node.name + "/axes", {0})}, {axis}, {}, node.name + "/axis_scalar");
    out.add("CumSum", {out.input(0), axis}, {out.output(0)},
            {{"exclusive", std::int64_t{node.attrs.at("exclusive").get<bool>() ? 1 : 0}},
             {"reverse", std::int64_t{node.attrs.at("reverse").get<bool>() ? 1 : 0}}},
            node.name);
    return {};
}

}  // namespace

const OpSchema& cumsum_schema() {
    static const OpSchema s{"cumsum", 1, 1, parse_cumsum, infer_cumsum, {"CumSum"}, import_cumsum, export_cumsum};
    return s;
}

}  // namespace psrun::nn
