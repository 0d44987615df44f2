// Element-wise math that decompositions PyTorch exports need when they are not fused
// (LayerNorm's Pow, exact GELU's Erf):
//   {"kind": "pow", "exponent": e}: x^e for a constant e (PyTorch: x ** e; x^e of a negative x
//     is NaN for a non-integer e, as in PyTorch);
//   the functions of hand_math.h, each {"kind": K} with no fields: erf; sin and cos (positional
//   encodings computed in the graph); tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh;
//   sign (-1, 0 or 1), floor, ceil and round (halves to even), whose gradient is 0, as PyTorch's.
//   Outside a function's domain (asin of 2) the result is NaN, as in PyTorch.
// Output shape = input shape; floats only; no tensors. FLOPs: 1 per element.
// ONNX: Pow (a constant scalar exponent; a positive constant base and a value exponent, 2 ** x,
// imports as exp(x ln 2); any other, x ** y or a trained exponent, as the "power" kind), and each
// function's op (Erf, Sin, ..., Round).
#include <cmath>
#include <vector>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/hand_math.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_pow(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto e, reader.number("exponent", std::nullopt));
    attrs["exponent"] = e;
    return {};
}

Result<void> infer_math(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    context.set_output(0, in);
    context.add_flops(static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

// Pow without a constant scalar exponent. Of a positive constant base c (torch.pow(2.0, x)):
// exp(y ln c). Any other (x ** y of two values; a learned exponent or base, for a float
// initializer trains as everywhere): the "power" kind (power.cpp).
Result<void> import_value_pow(OnnxNodeImport& node) {
    const auto base = node.floats(0);
    if (!node.initializer(0).empty() || !base || base->size() != 1 || !((*base)[0] > 0.0f)) {
        PSRUN_TRY_ASSIGN(auto x, node.value(0));
        PSRUN_TRY_ASSIGN(auto y, node.value(1));
        PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "power"}, {"inputs", {x, y}}}));
        node.bind_output(0, name);
        return {};
    }
    PSRUN_TRY_ASSIGN(auto y, node.value(1));
    const double log_base = std::log(static_cast<double>((*base)[0]));
    PSRUN_TRY_ASSIGN(
        auto scale,
        node.emit(
            {{"kind", "constant"}, {"type", "float"}, {"shape", nlohmann::json::array()}, {"values", {log_base}}}));
    PSRUN_TRY_ASSIGN(auto scaled, node.emit({{"kind", "mul"}, {"inputs", {y, scale}}}));
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "exp"}, {"inputs", {scaled}}}));
    node.bind_output(0, name);
    return {};
}

Result<void> import_math(OnnxNodeImport& node) {
    if (node.op_type() == "Pow") {
        const auto e = node.floats(1);
        if (!e || e->size() != 1 || !node.initializer(1).empty()) return import_value_pow(node);
    }
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    nlohmann::json layer = {{"inputs", {x}}};
    if (node.op_type() == "Pow") {
        const auto e = node.floats(1);
        layer["kind"] = "pow";
        layer["exponent"] = (*e)[0];
    } else {
        const HandMathFunction* f = find_hand_math({}, node.op_type());
        if (f == nullptr) return tl::unexpected(node.refuse("not an element-wise function the engine has"));
        layer["kind"] = std::string(f->kind);
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    node.bind_output(0, name);
    return {};
}

Result<void> export_math(OnnxNodeExport& out) {
    const Node& node = out.node();
    if (node.op == "pow") {
        const float e = static_cast<float>(node.attrs.at("exponent").get<double>());
        // A Constant node, not an initializer: that would import back as a trained exponent.
        const std::string exponent = out.fresh(node.name + "/exponent");
        out.constant_node(exponent, {}, std::span(&e, 1), "");
        out.add("Pow", {out.input(0), exponent}, {out.output(0)}, {}, node.name);
    } else {
        out.add(std::string(find_hand_math(node.op)->onnx_op), {out.input(0)}, {out.output(0)}, {}, node.name);
    }
    return {};
}

}  // namespace

const OpSchema& hand_math_schema(std::string_view kind) {
    static const std::vector<OpSchema> schemas = [] {
        std::vector<OpSchema> all;
        for (const auto& f : hand_math_functions())
            all.push_back(
                OpSchema{f.kind, 1, 1, parse_no_attributes, infer_math, {f.onnx_op}, import_math, export_math});
        return all;
    }();
    return family_member(schemas, kind);
}

const OpSchema& pow_schema() {
    static const OpSchema s{"pow", 1, 1, parse_pow, infer_math, {"Pow"}, import_math, export_math};
    return s;
}

}  // namespace psrun::nn
