// conv2d: {"kind": "conv2d", "filters": O, "kernel": k | [kh, kw], "stride": 1 | [sh, sw],
//          "padding": "valid" (default) | "same" | [top, left, bottom, right],
//          "groups": 1, "dilation": 1 | [dh, dw], "bias": true, "weight_init", "bias_init"}
// Input N x I x H x W, output N x O x OH x OW (window.h); cross-correlation as in TF and
// PyTorch. groups g splits the channels into g independent convolutions (g = I = O: depthwise).
// Tensors: w [O, I/g, KH, KW] (slot "w"), b [O] (slot "b"). ONNX: Conv.
// 1-D (PyTorch's Conv1d): "kernel": [k] (then "stride": s | [s], "dilation": d | [d], "padding":
// "valid" | "same" | [left, right]); input N x I x L, output N x O x OL, w [O, I/g, K].
// 3-D (PyTorch's Conv3d): "kernel": [kd, kh, kw] (then "stride" and "dilation": s | [sd, sh, sw],
// "padding": "valid" | "same" | [front, top, left, back, bottom, right], ONNX's order); input
// N x I x D x H x W, output N x O x OD x OH x OW, w [O, I/g, KD, KH, KW].
#include "workerd/nn/ops/conv.h"

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_conv(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto filters, reader.integer("filters", std::nullopt, 1, kMaxTensorElements));
    attrs["filters"] = filters;
    PSRUN_TRY_ASSIGN(auto groups, reader.integer("groups", 1, 1, kMaxTensorElements));
    if (is_1d_field(reader, "kernel")) {  // 1-D: every window field has one entry
        PSRUN_TRY_ASSIGN(auto kernel, read_extent1(reader, "kernel", std::nullopt, kMaxTensorElements));
        PSRUN_TRY_ASSIGN(auto stride, read_extent1(reader, "stride", 1, kMaxTensorElements));
        PSRUN_TRY_ASSIGN(auto dilation, read_extent1(reader, "dilation", 1, kMaxTensorElements));
        attrs["kernel"] = {kernel};
        attrs["stride"] = {stride};
        if (auto ok = parse_padding(reader, attrs, 1); !ok) return ok;
        if (groups != 1) attrs["groups"] = groups;
        if (dilation != 1) attrs["dilation"] = {dilation};
        return parse_trainable_options(reader, attrs, Initializer{InitKind::kGlorotUniform, 0.0});
    }
    if (is_3d_field(reader, "kernel")) {  // 3-D: every window field has three entries (or one value)
        PSRUN_TRY_ASSIGN(auto kernel, read_extent3(reader, "kernel", std::nullopt, kMaxTensorElements));
        PSRUN_TRY_ASSIGN(auto stride,
                         read_extent3(reader, "stride", std::vector<std::int64_t>(3, 1), kMaxTensorElements));
        PSRUN_TRY_ASSIGN(auto dilation,
                         read_extent3(reader, "dilation", std::vector<std::int64_t>(3, 1), kMaxTensorElements));
        attrs["kernel"] = kernel;
        attrs["stride"] = stride;
        if (auto ok = parse_padding(reader, attrs, 3); !ok) return ok;
        if (groups != 1) attrs["groups"] = groups;
        if (dilation != std::vector<std::int64_t>(3, 1)) attrs["dilation"] = dilation;
        return parse_trainable_options(reader, attrs, Initializer{InitKind::kGlorotUniform, 0.0});
    }
    PSRUN_TRY_ASSIGN(auto kernel, reader.extent("kernel", std::nullopt, kMaxTensorElements));
    PSRUN_TRY_ASSIGN(auto stride, reader.extent("stride", Extent2{1, 1}, kMaxTensorElements));
    PSRUN_TRY_ASSIGN(auto dilation, reader.extent("dilation", Extent2{1, 1}, kMaxTensorElements));
    attrs["kernel"] = {kernel.h, kernel.w};
    attrs["stride"] = {stride.h, stride.w};
    if (auto ok = parse_padding(reader, attrs); !ok) return ok;
    // Added after format 1: written only when set, so older descriptions keep their hash.
    if (groups != 1) attrs["groups"] = groups;
    if (dilation != Extent2{1, 1}) attrs["dilation"] = {dilation.h, dilation.w};
    return parse_trainable_options(reader, attrs, Initializer{InitKind::kGlorotUniform, 0.0});
}

Result<void> infer_conv(InferContext& context) {
    const ValueInfo& in = context.input(0);
    PSRUN_TRY_ASSIGN(auto g, conv_geometry(context.attrs(), in));
    const Window2d& w = g.window;
    Dims out{in.dims[0], Dim::of(g.filters)};
    for (const auto d : window_out_dims(w, g.spatial)) out.push_back(Dim::of(d));
    context.set_output(0, ValueInfo{out});
    if (auto ok = context.tensor("w", conv_weight_dims(g), attr_initializer(context.attrs(), "weight_init")); !ok)
        return ok;
    const double outputs = static_cast<double>(g.filters * w.od * w.oh * w.ow);
    context.add_flops(2.0 * static_cast<double>(g.in_channels / g.groups * w.kd * w.kh * w.kw) * outputs);
    if (g.bias) {
        if (auto ok = context.tensor("b", {g.filters}, attr_initializer(context.attrs(), "bias_init")); !ok) return ok;
        context.add_flops(outputs);
    }
    return {};
}

Result<void> import_conv(OnnxNodeImport& node) {
    std::vector<std::int64_t> w_dims;
    if (auto s = node.constant_shape(1)) w_dims = *s;
    else if (const ValueInfo* wi = node.info(1); wi && !has_batch(wi->dims)) w_dims = concrete(wi->dims, 1);
    if (w_dims.size() < 3 || w_dims.size() > 5)
        return tl::unexpected(
            node.refuse("the weights must be [O, I/groups, KH, KW], [O, I/groups, K] or [O, I/groups, KD, KH, KW]"));
    const std::size_t spatial = w_dims.size() - 2;
    const ValueInfo* x = node.info(0);
    if (x == nullptr || x->rank() != spatial + 2)
        return tl::unexpected(node.refuse(spatial == 2   ? "the input must be N x C x H x W (2-D weights)"
                                          : spatial == 3 ? "the input must be N x C x D x H x W (3-D weights)"
                                                         : "the input must be N x C x L (1-D weights)"));
    PSRUN_TRY_ASSIGN(auto strides, spatial_attr(node, "strides", spatial, 1));
    PSRUN_TRY_ASSIGN(auto dilations, spatial_attr(node, "dilations", spatial, 1));
    PSRUN_TRY_ASSIGN(auto group, node.int_attr("group", 1));
    const std::vector<std::int64_t> kernel(w_dims.begin() + 2, w_dims.end());
    nlohmann::json layer = {{"kind", "conv2d"},
                            {"filters", w_dims[0]},
                            {"kernel", kernel},
                            {"stride", strides},
                            {"bias", node.has_input(2)}};
    PSRUN_TRY_ASSIGN(auto input, node.value(0));
    layer["inputs"] = {input};
    PSRUN_TRY_ASSIGN(auto padding, import_padding(node, static_cast<int>(spatial)));
    layer["padding"] = padding;
    if (group != 1) layer["groups"] = group;
    if (dilations != std::vector<std::int64_t>(spatial, 1)) layer["dilation"] = dilations;
    return node.emit_weighted(std::move(layer));
}

Result<void> export_conv(OnnxNodeExport& out) {
    const Node& node = out.node();
    PSRUN_TRY_ASSIGN(auto g, conv_geometry(node.attrs, out.model().value(node.inputs[0])));
    const Window2d& w = g.window;
    std::vector<std::string> inputs{out.input(0), out.input(1)};
    if (g.bias) inputs.push_back(out.input(2));
    out.add("Conv", inputs, {out.output(0)},
            {{"kernel_shape", window_kernel(w, g.spatial)},
             {"strides", window_strides(w, g.spatial)},
             {"pads", window_onnx_pads(w, g.spatial)},
             {"dilations", window_dilations(w, g.spatial)},
             {"group", g.groups}},
            node.name);
    return {};
}

}  // namespace

Result<ConvGeometry> conv_geometry(const nlohmann::json& attrs, const ValueInfo& in) {
    const auto k = attrs.at("kernel").get<std::vector<std::int64_t>>();
    const auto spatial = static_cast<int>(k.size());
    bool ok = in.type == ElementType::kFloat && in.rank() == k.size() + 2;
    for (std::size_t i = 1; ok && i < in.rank(); ++i) ok = !in.dims[i].batch;
    if (!ok && spatial == 1)
        return tl::unexpected(op_error("a 1-D kernel [" + std::to_string(k[0]) + "] expects an N x C x L input, got " +
                                       to_string(in.dims)));
    if (!ok && spatial == 3)
        return tl::unexpected(op_error("a 3-D kernel [" + std::to_string(k[0]) + ", " + std::to_string(k[1]) + ", " +
                                       std::to_string(k[2]) + "] expects an N x C x D x H x W input, got " +
                                       to_string(in.dims)));
    if (!ok)
        return tl::unexpected(
            op_error("expects an image N x C x H x W input, got " + to_string(in.dims) +
                     (in.rank() == 2 ? " flat features (a dense layer came before)" : "") +
                     (in.rank() == 3 ? " (over N x C x L give a 1-D kernel: \"kernel\": [k])" : "") +
                     (in.rank() == 5 ? " (over N x C x D x H x W give a 3-D kernel: \"kernel\": [kd, kh, kw])" : "")));
    ConvGeometry g;
    g.spatial = spatial;
    g.in_channels = in.dims[1].value;
    g.filters = attrs.at("filters").get<std::int64_t>();
    g.groups = attrs.value("groups", std::int64_t{1});
    g.bias = attrs.at("bias").get<bool>();
    if (g.in_channels % g.groups != 0 || g.filters % g.groups != 0)
        return tl::unexpected(op_error("groups " + std::to_string(g.groups) + " must divide the input channels (" +
                                       std::to_string(g.in_channels) + ") and the filters (" +
                                       std::to_string(g.filters) + ")"));
    const auto s = attrs.at("stride").get<std::vector<std::int64_t>>();
    const auto d = attrs.value("dilation", std::vector<std::int64_t>(k.size(), 1));
    PSRUN_TRY_ASSIGN(auto w, plan_window_nd(attrs.at("padding"), in, k, s, d, false, "kernel"));
    g.window = w;
    if (!checked_product({g.filters, w.od, w.oh, w.ow}))
        return tl::unexpected(op_error("the output would have more than 2^31-1 elements per example"));
    return g;
}

std::vector<std::int64_t> conv_weight_dims(const ConvGeometry& g) {
    const std::int64_t per_group = g.in_channels / g.groups;
    if (g.spatial == 1) return {g.filters, per_group, g.window.kw};
    if (g.spatial == 3) return {g.filters, per_group, g.window.kd, g.window.kh, g.window.kw};
    return {g.filters, per_group, g.window.kh, g.window.kw};
}

namespace {

// Every weight once per output position (H x W, L, or D x H x W).
TrainingMacs conv_macs(const MacsContext& c) {
    const TensorDef* w = c.slot_tensor(0);
    if (w == nullptr) return {};  // weights from a graph value
    const auto& out = c.node.output_info.front().dims;
    double macs = static_cast<double>(w->size);
    if (out.size() == 4) macs *= static_cast<double>(out[2].value * out[3].value);                 // N, C, H, W
    if (out.size() == 3) macs *= static_cast<double>(out[2].value);                                // N, C, L (1-D)
    if (out.size() == 5) macs *= static_cast<double>(out[2].value * out[3].value * out[4].value);  // 3-D
    return c.weighted(macs);
}

}  // namespace

const OpSchema& conv2d_schema() {
    static const OpSchema schema{"conv2d", 1,           1,           parse_conv, infer_conv,
                                 {"Conv"}, import_conv, export_conv, true,       conv_macs};
    return schema;
}

}  // namespace psrun::nn
