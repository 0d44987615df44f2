// Element-wise arithmetic of two values with numpy broadcasting (either input may be the
// broadcast one; a scalar, a constant or a parameter included):
//   {"kind": "add", "inputs": ["a", "b"]}, "sub" (a - b), "mul", "div" (a / b).
//   {"kind": "mod", ...}: a - b * floor(a / b), the sign of b (Python's and torch's `%`);
//   {"kind": "fmod", ...}: a - b * trunc(a / b), the sign of a (C's %, torch.fmod).
// No fields, no tensors (bind a parameter layer's output as an input for a learned one). Float
// inputs (not mod, fmod), or two integer ones: an integer output without gradient (HF's position
// ids, `(cumsum(mask) + k) * mask`; raw ids hashed into buckets, `ids % 100003`). Integer
// division truncates (ONNX's Div); an integer divided by 0 gives 0, its remainder a.
// Output: the broadcast shape. FLOPs: 1 per output element.
// ONNX: Add, Sub, Mul, Div (a constant input becomes a constant layer); Mod, fmod 0 or 1 (float
// Mod: those formulas as div, floor or sign/abs, mul and sub nodes: their gradients, torch's).
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> infer_binary(InferContext& context) {
    const bool integers = context.input(0).type == ElementType::kInt && context.input(1).type == ElementType::kInt;
    const auto& op = context.node().op;
    if (!integers && (op == "mod" || op == "fmod"))
        return tl::unexpected(op_error("takes two integer inputs (" + context.input_name(0) + ", " +
                                       context.input_name(1) + "); a float remainder is a - b * floor(a / b)"));
    for (std::size_t i = 0; i < 2 && !integers; ++i)
        if (context.input(i).type != ElementType::kFloat)
            return tl::unexpected(op_error("expects floats; input " + std::to_string(i) + " (" + context.input_name(i) +
                                           ") holds integer ids"));
    PSRUN_TRY_ASSIGN(auto dims, broadcast_dims(context.input(0).dims, context.input(1).dims));
    if (dims.size() > 6) return tl::unexpected(op_error("the output would have more than 6 dims"));
    context.set_output(0, ValueInfo{dims, integers ? ElementType::kInt : ElementType::kFloat});
    context.add_flops(static_cast<double>(elements_per_example(dims).value_or(0)));
    return {};
}

const char* onnx_of(std::string_view kind) {
    return kind == "add" ? "Add" : kind == "sub" ? "Sub" : kind == "mul" ? "Mul" : kind == "div" ? "Div" : "Mod";
}

// A float Mod: a - b * floor(a / b) (fmod 0), a - b * sign(q) * floor(|q|) with q = a / b (fmod 1).
Result<std::string> float_mod(OnnxNodeImport& node, const std::string& a, const std::string& b, bool truncate) {
    auto one = [&node](const char* kind, std::vector<std::string> inputs) {
        return node.emit({{"kind", kind}, {"inputs", std::move(inputs)}});
    };
    PSRUN_TRY_ASSIGN(auto q, one("div", {a, b}));
    std::string whole;
    if (truncate) {
        PSRUN_TRY_ASSIGN(auto magnitude, one("abs", {q}));
        PSRUN_TRY_ASSIGN(auto down, one("floor", {magnitude}));
        PSRUN_TRY_ASSIGN(auto sign, one("sign", {q}));
        PSRUN_TRY_ASSIGN(whole, one("mul", {sign, down}));
    } else {
        PSRUN_TRY_ASSIGN(whole, one("floor", {q}));
    }
    PSRUN_TRY_ASSIGN(auto multiple, one("mul", {whole, b}));
    return one("sub", {a, multiple});
}

Result<void> import_binary(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto a, node.value(0));
    PSRUN_TRY_ASSIGN(auto b, node.value(1));
    const auto op = node.op_type();
    std::string kind = op == "Add" ? "add" : op == "Sub" ? "sub" : op == "Mul" ? "mul" : "div";
    if (op == "Mod") {
        PSRUN_TRY_ASSIGN(auto fmod, node.int_attr("fmod", 0));
        const ValueInfo* ia = node.info(0);
        const ValueInfo* ib = node.info(1);
        if (ia != nullptr && ib != nullptr && (ia->type == ElementType::kFloat || ib->type == ElementType::kFloat)) {
            PSRUN_TRY_ASSIGN(auto name, float_mod(node, a, b, fmod != 0));
            node.bind_output(0, name);
            return {};
        }
        kind = fmod != 0 ? "fmod" : "mod";
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", kind}, {"inputs", {a, b}}}));
    node.bind_output(0, name);
    return {};
}

Result<void> export_binary(OnnxNodeExport& out) {
    const auto& op = out.node().op;
    std::vector<std::pair<std::string, OnnxAttr>> attrs;
    if (op == "mod" || op == "fmod") attrs.emplace_back("fmod", std::int64_t{op == "fmod" ? 1 : 0});
    out.add(onnx_of(op), {out.input(0), out.input(1)}, {out.output(0)}, attrs, out.node().name);
    return {};
}

OpSchema make_binary_schema(std::string_view kind, std::vector<std::string_view> onnx_ops) {
    return OpSchema{kind, 2, 2, parse_no_attributes, infer_binary, std::move(onnx_ops), import_binary, export_binary};
}

}  // namespace

const OpSchema& binary_schema(std::string_view kind) {
    static const std::vector<OpSchema> schemas = {
        make_binary_schema("add", {"Add"}), make_binary_schema("sub", {"Sub"}), make_binary_schema("mul", {"Mul"}),
        make_binary_schema("div", {"Div"}), make_binary_schema("mod", {"Mod"}), make_binary_schema("fmod", {})};
    return family_member(schemas, kind);
}

}  // namespace psrun::nn
