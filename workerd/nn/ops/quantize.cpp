// Quantization-aware training: the fake quantization torch.fake_quantize_per_tensor_affine and
// _per_channel_affine compute, as ONNX writes it (QuantizeLinear, then DequantizeLinear):
//   {"kind": "quantize_linear", "scale": [s...], "zero_point": [z...], "axis": a, "type": "uint8"
//    | "int8", "min": lo, "max": hi}: q = clamp(round(x / s) + z, lo, hi) (halves to even), as
//    floats, where [lo, hi] is the type's range unless narrowed (torch's reduced range 0..127);
//    the gradient passes straight through where round(x / s) + z lies in [lo, hi], bounds
//    included (dx = dy / s), 0 elsewhere, as torch's fake quantization (whose chain with
//    dequantize_linear is dy there);
//   {"kind": "dequantize_linear", same fields}: y = (q - z) * s, dq = dy * s.
// One scale and zero point for the tensor, or one per index of axis `a` (per channel: a weight's
// axis 0, an activation's channels; not the batch axis). Floats in and out; no tensors. FLOPs: 1 per element.
// ONNX: QuantizeLinear and DequantizeLinear with constant scale and zero point (uint8 or int8;
// absent: uint8 0); a QuantizeLinear whose only reader is a Clip of constant bounds (how torch
// writes the range 0..127) imports as one quantize_linear with that range, so that the gradient
// passes at the bounds as torch's does (a clip layer's would not); a DequantizeLinear of a
// constant (stored int8 weights) imports as the float constant it computes. Export writes
// QuantizeLinear (then a Clip where the range is narrowed) then Cast to float, and Cast to the
// type then DequantizeLinear, so that the values between them stay what the kinds compute; a
// dequantize_linear of a quantize_linear's output of its type reads the 8-bit values as they are
// (a Cast from float would pass no gradient when the file is imported again).
#include <algorithm>
#include <cmath>
#include <memory>
#include <string_view>
#include <vector>

#include "workerd/nn/field_reader.h"
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

constexpr int kOnnxUint8 = 2, kOnnxInt8 = 3;

// The fields both kinds have.
Result<void> parse_dequantize(FieldReader& reader, nlohmann::json& attrs) {
    if (!reader.has("scale")) return tl::unexpected(reader.fail("scale", "required: a list of positive numbers"));
    const auto& scale = reader.raw("scale");
    if (!scale.is_array() || scale.empty() || scale.size() > (1u << 20))
        return tl::unexpected(reader.fail("scale", "must be a list of 1 or more positive numbers"));
    for (const auto& s : scale)
        if (!s.is_number() || !(s.get<double>() > 0.0) || !std::isfinite(s.get<double>()))
            return tl::unexpected(reader.fail("scale", "must hold positive finite numbers"));
    PSRUN_TRY_ASSIGN(auto type, reader.choice("type", 0, {"uint8", "int8"}));
    const std::int64_t lo = type == 0 ? 0 : -128, hi = type == 0 ? 255 : 127;
    std::vector<std::int64_t> zero(scale.size(), 0);
    if (reader.has("zero_point")) {
        const auto& z = reader.raw("zero_point");
        if (!z.is_array() || z.size() != scale.size())
            return tl::unexpected(reader.fail("zero_point", "must be a list as long as scale"));
        for (std::size_t i = 0; i < z.size(); ++i) {
            if (!z[i].is_number_integer() || z[i].get<std::int64_t>() < lo || z[i].get<std::int64_t>() > hi)
                return tl::unexpected(reader.fail("zero_point", "must hold integers of the type's range"));
            zero[i] = z[i].get<std::int64_t>();
        }
    }
    PSRUN_TRY_ASSIGN(auto axis, reader.integer("axis", 1, 0, 7));
    attrs["scale"] = scale;
    attrs["zero_point"] = zero;
    attrs["type"] = type == 0 ? "uint8" : "int8";
    attrs["axis"] = axis;
    return {};
}

// The common fields, then the range q is clamped to: the type's unless narrowed.
Result<void> parse_quantize(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY(parse_dequantize(reader, attrs));
    const std::int64_t lo = attrs.at("type") == "int8" ? -128 : 0, hi = lo + 255;
    PSRUN_TRY_ASSIGN(auto min, reader.integer("min", lo, lo, hi));
    PSRUN_TRY_ASSIGN(auto max, reader.integer("max", hi, lo, hi));
    if (!(min < max)) return tl::unexpected(reader.fail("max", "must be larger than \"min\""));
    attrs["min"] = min;
    attrs["max"] = max;
    return {};
}

Result<void> infer_quantize(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    const auto channels = static_cast<std::int64_t>(context.attrs().at("scale").size());
    const auto axis = static_cast<std::size_t>(context.attr_int("axis"));
    if (channels > 1 && (axis >= in.dims.size() || in.dims[axis].batch || in.dims[axis].value != channels))
        return tl::unexpected(op_error(std::to_string(channels) + " scales, one per index of axis " +
                                       std::to_string(axis) + ", which the input does not have (nor the batch axis)"));
    context.set_output(0, in);
    context.add_flops(static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

// Scale, zero point (uint8 or int8), axis of a QuantizeLinear or DequantizeLinear node.
struct QuantParams {
    std::vector<float> scale;
    std::vector<std::int64_t> zero;
    const char* type = "uint8";
    std::int64_t axis = 1;
    std::int64_t min = 0, max = 255;  // the range q is clamped to
};

Result<QuantParams> quant_params(OnnxNodeImport& node, std::int64_t rank) {
    QuantParams p;
    auto scale = node.floats(1);
    if (!scale || scale->empty()) return tl::unexpected(node.refuse("the scale must be a constant"));
    p.scale = std::move(*scale);
    p.zero.assign(p.scale.size(), 0);
    if (node.has_input(2)) {
        const int type = node.element_type(2);
        if (type != kOnnxUint8 && type != kOnnxInt8)
            return tl::unexpected(node.refuse("the zero point must be a constant of uint8 or int8"));
        p.type = type == kOnnxUint8 ? "uint8" : "int8";
        if (type == kOnnxInt8) p.min = -128, p.max = 127;
        auto zero = node.ints(2);
        if (!zero || zero->size() != p.scale.size())
            return tl::unexpected(node.refuse("the zero point must be a constant as long as the scale"));
        p.zero = std::move(*zero);
    }
    if (node.has_attr("block_size") || node.has_attr("output_dtype"))
        return tl::unexpected(node.refuse("blocked quantization and other output types are not supported"));
    PSRUN_TRY_ASSIGN(p.axis, node.int_attr("axis", 1));
    if (p.axis < 0) p.axis += rank;
    if (p.scale.size() == 1) p.axis = 1;
    return p;
}

nlohmann::json quant_layer(const char* kind, const QuantParams& p, const std::string& x) {
    nlohmann::json layer = {{"kind", kind},         {"inputs", {x}},  {"scale", p.scale},
                            {"zero_point", p.zero}, {"type", p.type}, {"axis", p.axis}};
    if (std::string_view(kind) == "quantize_linear") layer["min"] = p.min, layer["max"] = p.max;
    return layer;
}

// The Clip reading a QuantizeLinear's output alone, with constant bounds within the type's range
// that narrow it (torch's (0, 127)): the range is narrowed to them; nullptr when there is none.
std::unique_ptr<OnnxNodeImport> narrowing_clip(OnnxNodeImport& node, QuantParams& p) {
    auto clip = node.only_reader(0, "Clip");
    if (!clip) return nullptr;
    std::int64_t bound[2] = {p.min, p.max};
    for (std::size_t i : {std::size_t{1}, std::size_t{2}}) {
        if (!clip->has_input(i)) continue;
        const auto v = clip->ints(i);
        if (!v || v->size() != 1) return nullptr;
        bound[i - 1] = (*v)[0];
    }
    if (bound[0] < p.min || bound[1] > p.max || bound[0] >= bound[1]) return nullptr;
    p.min = bound[0], p.max = bound[1];
    return clip;
}

Result<void> import_quantize(OnnxNodeImport& node) {
    const bool quantize = node.op_type() == "QuantizeLinear";
    const ValueInfo* xi = node.info(0);
    if (xi == nullptr && !quantize && node.initializer(0).empty()) {  // stored integers: the floats they stand for
        const auto q = node.ints(0);
        const auto dims = node.constant_shape(0);
        if (!q || !dims) return tl::unexpected(node.refuse("its input must be a graph value or a constant"));
        PSRUN_TRY_ASSIGN(auto p, quant_params(node, static_cast<std::int64_t>(dims->size())));
        std::int64_t inner = 1;
        for (std::size_t d = static_cast<std::size_t>(p.axis) + 1; d < dims->size(); ++d) inner *= (*dims)[d];
        std::vector<float> values(q->size());
        for (std::size_t i = 0; i < q->size(); ++i) {
            const std::size_t c = p.scale.size() == 1 ? 0 : (i / static_cast<std::size_t>(inner)) % p.scale.size();
            values[i] = static_cast<float>((*q)[i] - p.zero[c]) * p.scale[c];
        }
        PSRUN_TRY_ASSIGN(auto name,
                         node.emit({{"kind", "constant"}, {"type", "float"}, {"shape", *dims}, {"values", values}}));
        node.bind_output(0, name);
        return {};
    }
    // A graph value, or a float initializer (a weight quantized in the graph): its tensor.
    const auto dims = node.constant_shape(0);
    if (xi == nullptr && !dims) return tl::unexpected(node.refuse("its input must be a graph value or a tensor"));
    const auto rank = static_cast<std::int64_t>(xi != nullptr ? xi->rank() : dims->size());
    PSRUN_TRY_ASSIGN(auto p, quant_params(node, rank));
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const auto clip = quantize ? narrowing_clip(node, p) : nullptr;
    PSRUN_TRY_ASSIGN(auto name, node.emit(quant_layer(quantize ? "quantize_linear" : "dequantize_linear", p, x)));
    node.bind_output(0, name);
    if (clip) {
        clip->bind_output(0, name);
        clip->fold();
    }
    return {};
}

// The quantize_linear of the same type as dequantize_linear `node` whose output it reads (its
// 8-bit values are then what the DequantizeLinear reads), or nullptr.
const Node* quantized_by(const ModelDescription& model, const Node& node) {
    for (const Node& n : model.nodes)
        if (n.op == "quantize_linear" && n.outputs[0] == node.inputs[0] && n.attrs.at("type") == node.attrs.at("type"))
            return &n;
    return nullptr;
}

// Whether quantize_linear `node`'s output is read as floats: by a layer other than such a
// dequantize_linear, or as the model's output or a head.
bool read_as_floats(const ModelDescription& model, const Node& node) {
    const std::string& v = node.outputs[0];
    if (model.output == v) return true;
    for (const Head& h : model.heads)
        if (h.value == v) return true;
    for (const Node& n : model.nodes)
        if (std::find(n.inputs.begin(), n.inputs.end(), v) != n.inputs.end() &&
            (n.op != "dequantize_linear" || quantized_by(model, n) != &node))
            return true;
    return false;
}

Result<void> export_quantize(OnnxNodeExport& out) {
    const Node& node = out.node();
    const auto scale = node.attrs.at("scale").get<std::vector<float>>();
    const auto zero = node.attrs.at("zero_point").get<std::vector<std::int64_t>>();
    const bool is_signed = node.attrs.at("type") == "int8";
    const std::vector<std::int64_t> dims =
        scale.size() == 1 ? std::vector<std::int64_t>{} : std::vector<std::int64_t>{std::int64_t(scale.size())};
    const std::string s = out.fresh(node.name + "/scale");
    out.constant_node(s, dims, scale, "");
    const std::string z = out.int8_constant(node.name + "/zero_point", dims, zero, is_signed);
    const std::int64_t onnx_type = is_signed ? kOnnxInt8 : kOnnxUint8;
    std::vector<std::pair<std::string, OnnxAttr>> axis;
    if (scale.size() > 1) axis.push_back({"axis", node.attrs.at("axis").get<std::int64_t>()});
    if (node.op == "quantize_linear") {
        // The 8-bit values under a name a dequantize_linear of them finds (shared_value).
        const std::string q8 = out.shared_value(node.name + "/q");
        const auto lo = node.attrs.at("min").get<std::int64_t>(), hi = node.attrs.at("max").get<std::int64_t>();
        const bool narrowed = lo != (is_signed ? -128 : 0) || hi != (is_signed ? 127 : 255);
        const std::string q = narrowed ? out.fresh(node.name + "/unclipped") : q8;
        out.add("QuantizeLinear", {out.input(0), s, z}, {q}, axis, node.name);
        if (narrowed)
            out.add("Clip",
                    {q, out.int8_constant(node.name + "/min", {}, {lo}, is_signed),
                     out.int8_constant(node.name + "/max", {}, {hi}, is_signed)},
                    {q8}, {}, node.name + "/clip");
        if (read_as_floats(out.model(), node)) out.add("Cast", {q8}, {out.output(0)}, {{"to", std::int64_t{1}}}, "");
        return {};
    }
    std::string q;
    if (const Node* quantize = quantized_by(out.model(), node)) {  // its 8-bit values, as they are
        q = out.shared_value(quantize->name + "/q");
    } else {
        q = out.fresh(node.name + "/q");
        out.add("Cast", {out.input(0)}, {q}, {{"to", onnx_type}}, "");
    }
    out.add("DequantizeLinear", {q, s, z}, {out.output(0)}, axis, node.name);
    return {};
}

}  // namespace

const OpSchema& quantize_schema(std::string_view kind) {
    static const std::vector<OpSchema> schemas = {
        {"quantize_linear", 1, 1, parse_quantize, infer_quantize, {"QuantizeLinear"}, import_quantize, export_quantize},
        {"dequantize_linear",
         1,
         1,
         parse_dequantize,
         infer_quantize,
         {"DequantizeLinear"},
         import_quantize,
         export_quantize},
    };
    return family_member(schemas, kind);
}

}  // namespace psrun::nn
