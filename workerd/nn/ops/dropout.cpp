// dropout: {"kind": "dropout", "keep_prob": p} or {"kind": "dropout", "rate": r}: exactly one;
//   keep_prob in (0, 1], rate = 1 - keep_prob in [0, 1). Training keeps each element with
//   probability keep_prob and scales it by 1/keep_prob (TF's tf.nn.dropout); evaluation passes
//   the input through. Masks are counter-based on (the step's seed, the layer's name, the
//   element's index in the plain layout).
// identity: {"kind": "identity"}: the input, unchanged.
// stop_gradient: {"kind": "stop_gradient"}: the input, unchanged, and no gradient through it
//   (PyTorch's x.detach(): a straight-through estimator x + (q(x) - x).detach(), a target held
//   fixed). ONNX has no such operator and torch.onnx drops detach(); python/psrun_torch.py's
//   export() writes each detach() as a psrun::StopGradient node (domain "psrun"), which imports as
//   this kind. Exported as Identity (the file's other readers compute the same forward).
// No tensors. ONNX: Dropout (constant ratio; exported as Identity), Identity, psrun::StopGradient.
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_dropout(FieldReader& reader, nlohmann::json& attrs) {
    const bool keep = reader.has("keep_prob");
    const bool rate = reader.has("rate");
    if (keep && rate) return tl::unexpected(reader.fail("rate", "give either \"keep_prob\" or \"rate\", not both"));
    if (!keep && !rate)
        return tl::unexpected(reader.fail("keep_prob", "missing: give \"keep_prob\" (TF 1.x) or \"rate\" (Keras)"));
    const std::string_view field = keep ? "keep_prob" : "rate";
    PSRUN_TRY_ASSIGN(auto value, reader.number(field, std::nullopt));
    if (keep && !(value > 0.0 && value <= 1.0))
        return tl::unexpected(reader.fail(field, "expected a number in (0, 1], got " + describe_value(value)));
    if (rate && !(value >= 0.0 && value < 1.0))
        return tl::unexpected(reader.fail(field, "expected a number in [0, 1), got " + describe_value(value)));
    attrs["keep_prob"] = keep ? value : 1.0 - value;
    return {};
}

Result<void> infer_dropout(InferContext& context) {
    const ValueInfo& in = context.input(0);
    context.set_output(0, in);
    if (context.node().op == "dropout") {
        if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
        context.add_flops(static_cast<double>(elements_per_example(in.dims).value_or(0)));
    }
    return {};
}

Result<void> import_dropout(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    if (node.op_type() == "Identity") {
        node.bind_output(0, x);  // no layer: the value itself
        return {};
    }
    float ratio = 0.5f;
    if (node.opset() < 12) {
        PSRUN_TRY_ASSIGN(auto r, node.float_attr("ratio", 0.5f));
        ratio = r;
    } else if (node.has_input(1)) {
        const auto r = node.floats(1);
        if (!r || r->size() != 1) return tl::unexpected(node.refuse("the ratio must be a constant scalar"));
        ratio = (*r)[0];
    }
    if (!(ratio >= 0.0f && ratio < 1.0f)) return tl::unexpected(node.refuse("ratio must be in [0, 1)"));
    if (ratio == 0.0f) {
        node.bind_output(0, x);
        return {};
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "dropout"}, {"inputs", {x}}, {"rate", ratio}}));
    node.bind_output(0, name);
    return {};
}

Result<void> import_stop_gradient(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "stop_gradient"}, {"inputs", {x}}}));
    node.bind_output(0, name);
    return {};
}

Result<void> export_identity(OnnxNodeExport& out) {
    out.add("Identity", {out.input(0)}, {out.output(0)}, {}, out.node().name);
    return {};
}

}  // namespace

const OpSchema& dropout_schema() {
    static const OpSchema schema{"dropout",      1, 1, parse_dropout, infer_dropout, {"Dropout"}, import_dropout,
                                 export_identity};
    return schema;
}

const OpSchema& identity_schema() {
    static const OpSchema schema{"identity",     1, 1, parse_no_attributes, infer_dropout, {"Identity"}, import_dropout,
                                 export_identity};
    return schema;
}

const OpSchema& stop_gradient_schema() {
    static const OpSchema schema{
        "stop_gradient", 1, 1, parse_no_attributes, infer_dropout, {"StopGradient"}, import_stop_gradient,
        export_identity};
    return schema;
}

}  // namespace psrun::nn
