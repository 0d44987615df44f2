// Element-wise selection, numpy broadcasting (output: the broadcast shape):
//   {"kind": "maximum", "inputs": ["a", "b"]}, "minimum": the larger (smaller) of a and b; the
//     gradient goes to the one chosen, halved between equal ones (as torch.maximum);
//   {"kind": "where", "inputs": ["cond", "x", "y"]}: x where cond (an integer mask, or floats:
//     non-zero is true) else y; the gradient goes to x where cond, to y elsewhere, each summed
//     over the axes it broadcasts along.
// The selected inputs (a and b; x and y) are all floats, or all integers: then the output is
// integer and has no gradient (ids clamped into a table, `torch.where(mask, ids, 0)`).
// No fields, no tensors. FLOPs: 1 per output element.
// ONNX: Max and Min (torch.maximum / torch.minimum; of more inputs, a chain of pairs), Where; an integer Clip
// (ids.clamp(0, V - 1)) imports as maximum and minimum (ops/activation.cpp).
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> infer_select(InferContext& context) {
    const bool where = context.node().op == "where";
    const std::size_t first = where ? 1 : 0;
    const ElementType type = context.input(first).type;
    Dims dims = context.input(0).dims;
    for (std::size_t i = 0; i < context.input_count(); ++i) {
        if (i > first && context.input(i).type != type)
            return tl::unexpected(
                op_error("input " + std::to_string(i) + " (" + context.input_name(i) + ") holds " +
                         (type == ElementType::kFloat ? "integers where input " : "floats where input ") +
                         std::to_string(first) + " (" + context.input_name(first) + ") holds " +
                         (type == ElementType::kFloat ? "floats" : "integers") + ": cast one of them"));
        PSRUN_TRY_ASSIGN(auto d, broadcast_dims(dims, context.input(i).dims));
        dims = d;
    }
    if (dims.size() > 6) return tl::unexpected(op_error("the output would have more than 6 dims"));
    context.set_output(0, ValueInfo{dims, type});
    context.add_flops(static_cast<double>(elements_per_example(dims).value_or(0)));
    return {};
}

Result<void> import_select(OnnxNodeImport& node) {
    const auto op = node.op_type();
    const std::size_t count = node.input_count();
    if (op == "Where") {
        if (count != 3) return tl::unexpected(node.refuse("expects 3 inputs"));
        nlohmann::json inputs = nlohmann::json::array();
        for (std::size_t i = 0; i < count; ++i) {
            PSRUN_TRY_ASSIGN(auto v, node.value(i));
            inputs.push_back(v);
        }
        PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "where"}, {"inputs", inputs}}));
        node.bind_output(0, name);
        return {};
    }
    // Max and Min take one or more inputs (ONNX's variadic form): a chain of pairs.
    PSRUN_TRY_ASSIGN(auto chosen, node.emit_chain(op == "Max" ? "maximum" : "minimum"));
    node.bind_output(0, chosen);
    return {};
}

Result<void> export_select(OnnxNodeExport& out) {
    const Node& node = out.node();
    std::vector<std::string> inputs;
    for (std::size_t i = 0; i < node.data_inputs; ++i) inputs.push_back(out.input(i));
    if (node.op == "where") {  // ONNX's condition is bool
        const std::string cond = out.fresh(node.name + "/cond");
        out.add("Cast", {inputs[0]}, {cond}, {{"to", std::int64_t{9}}}, node.name + "/cast");
        inputs[0] = cond;
    }
    out.add(node.op == "maximum"   ? "Max"
            : node.op == "minimum" ? "Min"
                                   : "Where",
            inputs, {out.output(0)}, {}, node.name);
    return {};
}

OpSchema make(std::string_view kind, std::string_view onnx, int inputs) {
    return OpSchema{kind, inputs, inputs, parse_no_attributes, infer_select, {onnx}, import_select, export_select};
}

}  // namespace

const OpSchema& select_schema(std::string_view kind) {
    static const std::vector<OpSchema> schemas = {make("maximum", "Max", 2), make("minimum", "Min", 2),
                                                  make("where", "Where", 3)};
    return family_member(schemas, kind);
}

}  // namespace psrun::nn
