// group_norm: {"kind": "group_norm", "groups": G, "epsilon": 1e-5, "scale": true, "center": true,
//              "affine": "channel"}
// Input N x C x (D x) (H x) W, rank 3 to 5, floats, G dividing C; output the same shape. Each
// example's channels are split into G groups of C/G consecutive channels, and every group is
// normalised over its channels and the spatial axes together (mean and population variance),
// as nn.GroupNorm(G, C): y = scale * (x - mean) / sqrt(var + epsilon) + bias. groups = C is
// nn.InstanceNorm (each channel alone), groups = 1 normalises the whole example. No state.
// Tensors: scale (slot "scale", ones; only with "scale") and bias (slot "bias", zeros; only
// with "center"), [C] per channel ("affine": "channel", PyTorch's) or [G] per group ("group":
// ONNX GroupNormalization before opset 21).
// ONNX import: InstanceNormalization (groups = C, its scale and B bound; constant ones or
// zeros drop them), GroupNormalization (opset 18: scale and bias per group, or per channel as
// opset 21 has them), and PyTorch's nn.GroupNorm decomposition (Reshape, InstanceNormalization,
// Reshape, Mul, Add: workerd/onnx/onnx_patterns_norm.cpp). Export (opset 13): groups = C per
// channel as InstanceNormalization; otherwise PyTorch's form, Reshape(x, [0, G, -1]),
// InstanceNormalization (the per-group tensors, or constant ones and zeros), Reshape to
// Shape(x), then Mul and Add by the per-channel tensors unsqueezed to [C, 1, ...].
#include <algorithm>
#include <numeric>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/normalization.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_group_norm(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto groups, reader.integer("groups", std::nullopt, 1, kMaxTensorElements));
    PSRUN_TRY_ASSIGN(auto epsilon, reader.number("epsilon", 1e-5));
    if (!(epsilon > 0.0 && epsilon <= 1.0))
        return tl::unexpected(reader.fail("epsilon", "expected a number in (0, 1], got " + describe_value(epsilon)));
    PSRUN_TRY_ASSIGN(auto scale, reader.boolean("scale", true));
    PSRUN_TRY_ASSIGN(auto center, reader.boolean("center", true));
    PSRUN_TRY_ASSIGN(auto affine, reader.choice("affine", 0, {"channel", "group"}));
    attrs["groups"] = groups;
    attrs["epsilon"] = epsilon;
    attrs["scale"] = scale;
    attrs["center"] = center;
    attrs["affine"] = affine == 0 ? "channel" : "group";
    return {};
}

Result<void> infer_group_norm(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    if (in.rank() < 3 || in.rank() > 5 || in.dims[0] != Dim::batch_times(1))
        return tl::unexpected(
            op_error("expects an N x C x (D x H x) W input of rank 3 to 5, got " + to_string(in.dims)));
    for (std::size_t i = 1; i < in.rank(); ++i)
        if (in.dims[i].batch)
            return tl::unexpected(op_error("expects the batch axis first only, got " + to_string(in.dims)));
    const std::int64_t channels = in.dims[1].value, groups = context.attr_int("groups");
    if (groups > channels || channels % groups != 0)
        return tl::unexpected(op_error("groups " + std::to_string(groups) + " does not divide the " +
                                       std::to_string(channels) + " channels of " + to_string(in.dims)));
    context.set_output(0, in);
    const std::int64_t size = context.attr_string("affine") == "group" ? groups : channels;
    if (context.attr_bool("scale")) {
        if (auto ok = context.tensor("scale", {size}, Initializer{InitKind::kConstant, 1.0}); !ok) return ok;
    }
    if (context.attr_bool("center")) {
        if (auto ok = context.tensor("bias", {size}, Initializer{InitKind::kZeros, 0.0}); !ok) return ok;
    }
    context.add_flops(5.0 * static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

// An affine input of a normalisation node: a float initializer (bound as the tensor), known
// constants equal to `neutral` everywhere (dropped: the field false), or any other value (bound).
struct AffineInput {
    bool on = false;
    std::string bound;
    std::int64_t size = 0;
};

Result<AffineInput> affine_input(OnnxNodeImport& node, std::size_t i, float neutral, const char* what) {
    AffineInput a;
    std::optional<std::vector<std::int64_t>> shape = node.constant_shape(i);
    if (node.initializer(i).empty()) {
        if (auto known = node.floats(i)) {
            if (std::all_of(known->begin(), known->end(), [&](float v) { return v == neutral; })) {
                a.size = static_cast<std::int64_t>(known->size());
                return a;
            }
        } else if (const ValueInfo* v = node.info(i); v != nullptr && v->rank() == 1 && !v->dims[0].batch) {
            shape = std::vector<std::int64_t>{v->dims[0].value};
        }
    }
    if (!shape || shape->size() != 1)
        return tl::unexpected(node.refuse(std::string(what) + " must be a vector of fixed size"));
    PSRUN_TRY_ASSIGN(auto bound, node.slot(i));
    a.on = true;
    a.bound = bound;
    a.size = (*shape)[0];
    return a;
}

// InstanceNormalization(x, scale [C], B [C]) and GroupNormalization(x, scale, bias).
Result<void> import_group_norm(OnnxNodeImport& node) {
    const ValueInfo* x = node.info(0);
    if (x == nullptr || x->rank() < 3 || x->rank() > 5)
        return tl::unexpected(node.refuse("the input must be N x C x (D x H x) W, rank 3 to 5"));
    const std::int64_t channels = x->dims[1].value;
    const bool instance = node.op_type() == "InstanceNormalization";
    PSRUN_TRY_ASSIGN(auto groups, instance ? Result<std::int64_t>(channels) : node.int_attr("num_groups", 0));
    if (groups < 1 || groups > channels || channels % groups != 0)
        return tl::unexpected(node.refuse("num_groups " + std::to_string(groups) + " does not divide the " +
                                          std::to_string(channels) + " channels"));
    PSRUN_TRY_ASSIGN(auto epsilon, node.float_attr("epsilon", 1e-5f));
    PSRUN_TRY_ASSIGN(auto scale, affine_input(node, 1, 1.0f, "scale"));
    PSRUN_TRY_ASSIGN(auto bias, affine_input(node, 2, 0.0f, instance ? "B" : "bias"));
    // Per channel unless a tensor has one value per group (GroupNormalization before opset 21).
    bool per_group = false, per_channel = false;
    for (const AffineInput* a : {&scale, &bias}) {
        const bool channel = a->size == channels, group = !instance && a->size == groups;
        if (!channel && !group)
            return tl::unexpected(
                node.refuse("its " + std::string(a == &scale ? "scale" : "bias") + " has " + std::to_string(a->size) +
                            " values where the " + std::to_string(channels) + " channels" +
                            (instance ? "" : " or " + std::to_string(groups) + " groups") + " need one each"));
        if (a->on && !channel) per_group = true;
        if (a->on && !group) per_channel = true;
    }
    if (per_group && per_channel)
        return tl::unexpected(node.refuse("its scale and bias must both be per channel or both per group"));
    nlohmann::json tensors = nlohmann::json::object();
    if (scale.on) tensors["scale"] = scale.bound;
    if (bias.on) tensors["bias"] = bias.bound;
    PSRUN_TRY_ASSIGN(auto input, node.value(0));
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "group_norm"},
                                           {"inputs", {input}},
                                           {"groups", groups},
                                           {"epsilon", onnx_float(epsilon)},
                                           {"scale", scale.on},
                                           {"center", bias.on},
                                           {"affine", per_group && groups != channels ? "group" : "channel"},
                                           {"tensors", tensors}}));
    node.bind_output(0, name);
    return {};
}

Result<void> export_group_norm(OnnxNodeExport& out) {
    const Node& node = out.node();
    const ValueInfo& in = out.model().value(node.inputs[0]);
    const std::int64_t channels = in.dims[1].value, groups = node.attrs.at("groups").get<std::int64_t>();
    const bool scale = node.attrs.at("scale").get<bool>(), center = node.attrs.at("center").get<bool>();
    const bool per_group = node.attrs.at("affine").get<std::string>() == "group" || groups == channels;
    const auto epsilon = static_cast<float>(node.attrs.at("epsilon").get<double>());
    const std::string& n = node.name;
    std::size_t slot = 1;
    const std::string scale_in = scale ? out.input(slot++) : "", bias_in = center ? out.input(slot) : "";
    // InstanceNormalization's scale and B: the tensors when they are per group, else constant
    // ones and zeros (Constant nodes: an importer takes initializers for trained tensors).
    const std::vector<float> ones(static_cast<std::size_t>(groups), 1.0f), zeros(ones.size(), 0.0f);
    auto neutral = [&](const std::string& hint, const std::vector<float>& values) {
        const std::string v = out.fresh(n + "/" + hint);
        out.constant_node(v, {groups}, values, "");
        return v;
    };
    const std::string inst_scale = per_group && scale ? scale_in : neutral("ones", ones);
    const std::string inst_bias = per_group && center ? bias_in : neutral("zeros", zeros);
    if (groups == channels) {
        out.add("InstanceNormalization", {out.input(0), inst_scale, inst_bias}, {out.output(0)}, {{"epsilon", epsilon}},
                n);
        return {};
    }
    const std::string grouped = out.fresh(n + "/grouped"), normed = out.fresh(n + "/normalized"),
                      shape = out.fresh(n + "/shape");
    const bool affine_after = !per_group && (scale || center);
    const std::string back = affine_after ? out.fresh(n + "/reshaped") : out.output(0);
    out.add("Reshape", {out.input(0), out.int64_constant(n + "/group_shape", {0, groups, -1})}, {grouped}, {},
            n + "/Reshape");
    out.add("InstanceNormalization", {grouped, inst_scale, inst_bias}, {normed}, {{"epsilon", epsilon}},
            n + "/InstanceNormalization");
    out.add("Shape", {out.input(0)}, {shape}, {}, n + "/Shape");
    out.add("Reshape", {normed, shape}, {back}, {}, affine_after ? n + "/Reshape_1" : n);
    if (!affine_after) return {};
    // [C] -> [C, 1, ...] to broadcast over the spatial axes.
    std::vector<std::int64_t> axes(in.rank() - 2);
    std::iota(axes.begin(), axes.end(), 1);
    const std::string axes_value = out.int64_constant(n + "/axes", axes);
    auto unsqueezed = [&](const std::string& tensor, const std::string& hint) {
        const std::string v = out.fresh(n + "/" + hint);
        out.add("Unsqueeze", {tensor, axes_value}, {v}, {}, n + "/Unsqueeze_" + hint);
        return v;
    };
    std::string y = back;
    if (scale) {
        const std::string scaled = center ? out.fresh(n + "/scaled") : out.output(0);
        out.add("Mul", {y, unsqueezed(scale_in, "scale")}, {scaled}, {}, center ? n + "/Mul" : n);
        y = scaled;
    }
    if (center) out.add("Add", {y, unsqueezed(bias_in, "bias")}, {out.output(0)}, {}, n);
    return {};
}

}  // namespace

const OpSchema& group_norm_schema() {
    static const OpSchema schema{"group_norm",
                                 1,
                                 1,
                                 parse_group_norm,
                                 infer_group_norm,
                                 {"InstanceNormalization", "GroupNormalization"},
                                 import_group_norm,
                                 export_group_norm};
    return schema;
}

}  // namespace psrun::nn
