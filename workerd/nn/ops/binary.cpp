// Element-wise arithmetic of two values with numpy broadcasting (either input may be the
// broadcast one; a scalar, a constant or a parameter included):
//   {"kind": "add", "inputs": ["a", "b"]}, "sub" (a - b), "mul", "div" (a / b).
// No fields, no tensors (bind a parameter layer's output as an input for a learned one). Float
// inputs, or (add, sub, mul) two integer ones: an integer output without gradient (HF's
// position ids, `(cumsum(mask) + k) * mask`). Output: the broadcast shape. FLOPs: 1 per output
// element.
// ONNX: Add, Sub, Mul, Div (a constant input becomes a constant layer).
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> infer_binary(InferContext& context) {
    const bool integers = context.input(0).type == ElementType::kInt && context.input(1).type == ElementType::kInt;
    if (integers && context.node().op == "div")
        return tl::unexpected(op_error("divides integers (" + context.input_name(0) + " by " + context.input_name(1) +
                                       "): the engine divides floats only; cast them to float first"));
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
    return kind == "add" ? "Add" : kind == "sub" ? "Sub" : kind == "mul" ? "Mul" : "Div";
}

Result<void> import_binary(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto a, node.value(0));
    PSRUN_TRY_ASSIGN(auto b, node.value(1));
    const auto op = node.op_type();
    const char* kind = op == "Add" ? "add" : op == "Sub" ? "sub" : op == "Mul" ? "mul" : "div";
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", kind}, {"inputs", {a, b}}}));
    node.bind_output(0, name);
    return {};
}

Result<void> export_binary(OnnxNodeExport& out) {
    out.add(onnx_of(out.node().op), {out.input(0), out.input(1)}, {out.output(0)}, {}, out.node().name);
    return {};
}

OpSchema make(std::string_view kind) {
    return OpSchema{kind, 2, 2, parse_no_attributes, infer_binary, {onnx_of(kind)}, import_binary, export_binary};
}

}  // namespace

const OpSchema& binary_schema(std::string_view kind) {
    static const std::vector<OpSchema> schemas = {make("add"), make("sub"), make("mul"), make("div")};
    return family_member(schemas, kind);
}

}  // namespace psrun::nn
