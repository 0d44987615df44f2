// Masks and type changes, no gradients (their outputs are integers, or floats made of integers):
//   {"kind": "equal", "inputs": ["a", "b"]}, "less" (a < b), "greater" (a > b): 1 where true,
//     else 0, an integer value of the broadcast shape (a padding mask `ids != 0` is equal then
//     not); inputs of either type, compared as floats (integers exact below 2^24);
//   {"kind": "not"}: 1 where the input is 0, else 0 (integers);
//   {"kind": "is_nan"}: 1 where the input is NaN; {"kind": "is_inf", "negative": true,
//     "positive": true}: 1 where it is -inf (negative) or +inf (positive) (torch.isnan, isinf,
//     nan_to_num);
//   {"kind": "cast", "to": "float" | "int"}: integers to floats, or floats to integers (truncated
//     toward zero).
// No tensors. FLOPs: 1 per output element.
// ONNX: Equal, Less, Greater, Not, IsNaN, IsInf (detect_negative, detect_positive), Cast. Cast to bool imports as
// not(equal(x, 0)) where x is float, as the value itself where x is an integer mask already; a Cast that keeps the kind
// of type (int64 to int32, float to double) is the value itself; a Cast of the batch size (a multiple of N known at
// import) to float is the sum of a [N] constant. Export writes int64 for integer values (the comparisons' bool cast to
// int64).
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

constexpr std::int64_t kOnnxFloat = 1, kOnnxBool = 9, kOnnxDouble = 11, kOnnxFloat16 = 10, kOnnxBfloat16 = 16,
                       kOnnxInt64 = 7;

Result<void> parse_cast(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto to, reader.choice("to", std::nullopt, {"float", "int"}));
    attrs["to"] = to == 0 ? "float" : "int";
    return {};
}

Result<void> parse_is_inf(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto negative, reader.boolean("negative", true));
    PSRUN_TRY_ASSIGN(auto positive, reader.boolean("positive", true));
    attrs["negative"] = negative;
    attrs["positive"] = positive;
    return {};
}

Result<void> infer_mask(InferContext& context) {
    const std::string& op = context.node().op;
    Dims dims = context.input(0).dims;
    ElementType type = ElementType::kInt;
    if (op == "cast") {
        type = context.attr_string("to") == "float" ? ElementType::kFloat : ElementType::kInt;
    } else if (op != "not" && op != "is_nan" && op != "is_inf") {
        PSRUN_TRY_ASSIGN(auto d, broadcast_dims(dims, context.input(1).dims));
        dims = d;
    }
    if (dims.size() > 6) return tl::unexpected(op_error("the output would have more than 6 dims"));
    context.set_output(0, ValueInfo{dims, type});
    context.add_flops(static_cast<double>(elements_per_example(dims).value_or(0)));
    return {};
}

// Cast of the batch size k * N to a float (F.kl_div's reduction="batchmean", loss.sum() /
// x.shape[0]): the sum of a [N] constant filled with k, a scalar computed at run time.
Result<bool> import_batch_size_cast(OnnxNodeImport& node) {
    const auto n = node.symbolic_ints(0);
    if (!n || n->size() != 1 || !n->front().batch) return false;
    PSRUN_TRY_ASSIGN(auto to, node.int_attr("to", 0));
    if (to != kOnnxFloat && to != kOnnxDouble && to != kOnnxFloat16 && to != kOnnxBfloat16) return false;
    PSRUN_TRY_ASSIGN(
        auto ones,
        node.emit({{"kind", "constant"}, {"type", "float"}, {"shape", {n->front().to_string()}}, {"fill", 1.0}}));
    PSRUN_TRY_ASSIGN(auto name,
                     node.emit({{"kind", "reduce_sum"}, {"inputs", {ones}}, {"axes", {0}}, {"keepdims", false}}));
    node.bind_output(0, name);
    return true;
}

Result<void> import_mask(OnnxNodeImport& node) {
    const auto op = node.op_type();
    if (op == "Cast") {
        PSRUN_TRY_ASSIGN(auto batch_size, import_batch_size_cast(node));
        if (batch_size) return {};
    }
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const ValueInfo* info = node.info(0);
    std::string result;
    if (op == "Cast") {
        PSRUN_TRY_ASSIGN(auto to, node.int_attr("to", 0));
        const bool to_float = to == kOnnxFloat || to == kOnnxDouble || to == kOnnxFloat16 || to == kOnnxBfloat16;
        const bool from_float = info == nullptr || info->type == ElementType::kFloat;
        if (to == kOnnxBool && from_float) {  // x != 0
            PSRUN_TRY_ASSIGN(
                auto zero,
                node.emit(
                    {{"kind", "constant"}, {"type", "float"}, {"shape", nlohmann::json::array()}, {"values", {0.0}}}));
            PSRUN_TRY_ASSIGN(auto eq, node.emit({{"kind", "equal"}, {"inputs", {x, zero}}}));
            PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "not"}, {"inputs", {eq}}}));
            result = name;
        } else if (to_float == from_float || to == kOnnxBool) {
            result = x;  // the same kind of type (bool from an integer mask: the mask itself)
        } else {
            PSRUN_TRY_ASSIGN(auto name,
                             node.emit({{"kind", "cast"}, {"inputs", {x}}, {"to", to_float ? "float" : "int"}}));
            result = name;
        }
    } else if (op == "IsNaN" || op == "IsInf") {
        nlohmann::json layer = {{"kind", op == "IsNaN" ? "is_nan" : "is_inf"}, {"inputs", {x}}};
        if (op == "IsInf") {
            PSRUN_TRY_ASSIGN(auto negative, node.int_attr("detect_negative", 1));
            PSRUN_TRY_ASSIGN(auto positive, node.int_attr("detect_positive", 1));
            layer.update({{"negative", negative != 0}, {"positive", positive != 0}});
        }
        PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
        result = name;
    } else {
        nlohmann::json inputs = {x};
        if (op != "Not") {
            PSRUN_TRY_ASSIGN(auto y, node.value(1));
            inputs.push_back(y);
        }
        PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", op == "Equal"     ? "equal"
                                                        : op == "Less"    ? "less"
                                                        : op == "Greater" ? "greater"
                                                                          : "not"},
                                               {"inputs", inputs}}));
        result = name;
    }
    node.bind_output(0, result);
    return {};
}

Result<void> export_mask(OnnxNodeExport& out) {
    const Node& node = out.node();
    if (node.op == "cast") {
        const bool to_float = node.attrs.at("to") == "float";
        out.add("Cast", {out.input(0)}, {out.output(0)}, {{"to", to_float ? kOnnxFloat : kOnnxInt64}}, node.name);
        return {};
    }
    std::vector<std::string> inputs = {out.input(0)};
    std::vector<std::pair<std::string, OnnxAttr>> attrs;
    if (node.op == "is_inf") {
        attrs = {{"detect_negative", std::int64_t{node.attrs.at("negative").get<bool>() ? 1 : 0}},
                 {"detect_positive", std::int64_t{node.attrs.at("positive").get<bool>() ? 1 : 0}}};
    } else if (node.op != "not" && node.op != "is_nan") {
        inputs.push_back(out.input(1));
    } else if (node.op == "not") {  // Not wants bool
        const std::string b = out.fresh(node.name + "/bool");
        out.add("Cast", {inputs[0]}, {b}, {{"to", kOnnxBool}}, node.name + "/bool");
        inputs[0] = b;
    }
    const std::string flag = out.fresh(node.name + "/flag");
    out.add(node.op == "equal"     ? "Equal"
            : node.op == "less"    ? "Less"
            : node.op == "greater" ? "Greater"
            : node.op == "is_nan"  ? "IsNaN"
            : node.op == "is_inf"  ? "IsInf"
                                   : "Not",
            inputs, {flag}, attrs, node.name + "/op");
    out.add("Cast", {flag}, {out.output(0)}, {{"to", kOnnxInt64}}, node.name);
    return {};
}

OpSchema make_mask(std::string_view kind, std::string_view onnx, int inputs) {
    return OpSchema{kind,        inputs,
                    inputs,      kind == "cast" ? parse_cast : kind == "is_inf" ? parse_is_inf : parse_no_attributes,
                    infer_mask,  {onnx},
                    import_mask, export_mask,
                    false};
}

}  // namespace

const OpSchema& mask_schema(std::string_view kind) {
    static const std::vector<OpSchema> schemas = {make_mask("equal", "Equal", 2),     make_mask("less", "Less", 2),
                                                  make_mask("greater", "Greater", 2), make_mask("not", "Not", 1),
                                                  make_mask("is_nan", "IsNaN", 1),    make_mask("is_inf", "IsInf", 1),
                                                  make_mask("cast", "Cast", 1)};
    return family_member(schemas, kind);
}

}  // namespace psrun::nn
