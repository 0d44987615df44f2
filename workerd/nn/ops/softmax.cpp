// Softmax over one axis, mid-graph (attention's scores):
//   {"kind": "softmax", "axis": -1}: exp(x) / sum(exp(x)) along `axis`;
//   {"kind": "log_softmax", "axis": -1}: x - log(sum(exp(x))) along `axis`.
// `axis` in [-rank, rank), the default the last dim; never the batch dim (each example is
// normalised on its own). Output shape = input shape; floats only; no tensors. FLOPs: 5 per
// element (max, subtract, exp, sum, divide).
// ONNX: Softmax, LogSoftmax (opset 13; at opsets 11 and 12, whose axis flattens the dims
// after it, only an axis that is the last dim). A Softmax or LogSoftmax that ends the graph is
// the loss's and is dropped by the importer, not imported here.
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_softmax(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axis, reader.integer("axis", -1, -6, 5));
    attrs["axis"] = axis;
    return {};
}

Result<void> infer_softmax(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    PSRUN_TRY_ASSIGN(auto axis, normal_axis(context.attr_int("axis"), in.rank()));
    if (in.dims[static_cast<std::size_t>(axis)].batch)
        return tl::unexpected(op_error("axis " + std::to_string(context.attr_int("axis")) + " of " +
                                       to_string(in.dims) +
                                       " is the batch dim; normalise along a dim of each example (e.g. -1)"));
    context.set_output(0, in);
    context.add_flops(5.0 * static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

Result<void> import_softmax(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const ValueInfo* in = node.info(0);
    if (in == nullptr) return tl::unexpected(node.refuse("the input's rank is unknown"));
    const std::int64_t rank = static_cast<std::int64_t>(in->rank());
    PSRUN_TRY_ASSIGN(auto axis, node.int_attr("axis", node.opset() >= 13 ? -1 : 1));
    if (node.opset() < 13 && axis != -1 && axis != rank - 1)
        return tl::unexpected(node.refuse("axis " + std::to_string(axis) + " at opset " + std::to_string(node.opset()) +
                                          " normalises the dims after it flattened; only the last dim (" +
                                          std::to_string(rank - 1) + ") is supported (export at opset 13)"));
    auto name =
        node.emit({{"kind", node.op_type() == "Softmax" ? "softmax" : "log_softmax"}, {"inputs", {x}}, {"axis", axis}});
    if (!name) return tl::unexpected(name.error());
    node.bind_output(0, *name);
    return {};
}

Result<void> export_softmax(OnnxNodeExport& out) {
    const Node& node = out.node();
    out.add(node.op == "softmax" ? "Softmax" : "LogSoftmax", {out.input(0)}, {out.output(0)},
            {{"axis", node.attrs.at("axis").get<std::int64_t>()}}, node.name);
    return {};
}

}  // namespace

const OpSchema& softmax_schema() {
    static const OpSchema s{"softmax", 1, 1, parse_softmax, infer_softmax, {"Softmax"}, import_softmax, export_softmax};
    return s;
}

const OpSchema& log_softmax_schema() {
    static const OpSchema s{"log_softmax", 1, 1, parse_softmax, infer_softmax, {"LogSoftmax"}, import_softmax,
                            export_softmax};
    return s;
}

}  // namespace psrun::nn
