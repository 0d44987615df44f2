// Element-wise math that decompositions PyTorch exports need when they are not fused
// (LayerNorm's Pow, exact GELU's Erf):
//   {"kind": "pow", "exponent": e}: x^e for a constant e (PyTorch: x ** e; x^e of a negative x
//     is NaN for a non-integer e, as in PyTorch);
//   {"kind": "erf"}: the error function.
// Output shape = input shape; floats only; no tensors. FLOPs: 1 per element.
// ONNX: Pow (a constant scalar exponent), Erf.
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_pow(FieldReader& reader, nlohmann::json& attrs) {
    auto e = reader.number("exponent", std::nullopt);
    if (!e) return tl::unexpected(e.error());
    attrs["exponent"] = *e;
    return {};
}

Result<void> infer_math(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    context.set_output(0, in);
    context.add_flops(static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

Result<void> import_math(OnnxNodeImport& node) {
    auto x = node.value(0);
    if (!x) return tl::unexpected(x.error());
    nlohmann::json layer = {{"inputs", {*x}}};
    if (node.op_type() == "Pow") {
        const auto e = node.floats(1);
        if (!e || e->size() != 1)
            return tl::unexpected(node.refuse("the exponent must be a constant scalar (the engine raises to a fixed power)"));
        layer["kind"] = "pow";
        layer["exponent"] = (*e)[0];
    } else {
        layer["kind"] = "erf";
    }
    auto name = node.emit(layer);
    if (!name) return tl::unexpected(name.error());
    node.bind_output(0, *name);
    return {};
}

Result<void> export_math(OnnxNodeExport& out) {
    const Node& node = out.node();
    if (node.op == "pow") {
        const float e = static_cast<float>(node.attrs.at("exponent").get<double>());
        out.add("Pow", {out.input(0), out.float_constant(node.name + "/exponent", {}, std::span(&e, 1))}, {out.output(0)}, {},
                node.name);
    } else {
        out.add("Erf", {out.input(0)}, {out.output(0)}, {}, node.name);
    }
    return {};
}

}  // namespace

const OpSchema& pow_schema() {
    static const OpSchema s{"pow", 1, 1, parse_pow, infer_math, {"Pow"}, import_math, export_math};
    return s;
}

const OpSchema& erf_schema() {
    static const OpSchema s{"erf", 1, 1, parse_no_attributes, infer_math, {"Erf"}, import_math, export_math};
    return s;
}

}  // namespace psrun::nn
