// conv2d: {"kind": "conv2d", "filters": O, "kernel": k | [kh, kw], "stride": 1 | [sh, sw],
//          "padding": "valid" (default) | "same" | [top, left, bottom, right],
//          "groups": 1, "dilation": 1 | [dh, dw], "bias": true, "weight_init", "bias_init"}
// Input N x I x H x W, output N x O x OH x OW (window.h); cross-correlation as in TF and
// PyTorch. groups g splits the channels into g independent convolutions (g = I = O: depthwise).
// Tensors: w [O, I/g, KH, KW] (slot "w"), b [O] (slot "b"). ONNX: Conv.
#include "workerd/nn/ops/conv.h"

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_conv(FieldReader& reader, nlohmann::json& attrs) {
    auto filters = reader.integer("filters", std::nullopt, 1, kMaxTensorElements);
    if (!filters) return tl::unexpected(filters.error());
    auto kernel = reader.extent("kernel", std::nullopt, kMaxTensorElements);
    if (!kernel) return tl::unexpected(kernel.error());
    auto stride = reader.extent("stride", Extent2{1, 1}, kMaxTensorElements);
    if (!stride) return tl::unexpected(stride.error());
    auto groups = reader.integer("groups", 1, 1, kMaxTensorElements);
    if (!groups) return tl::unexpected(groups.error());
    auto dilation = reader.extent("dilation", Extent2{1, 1}, kMaxTensorElements);
    if (!dilation) return tl::unexpected(dilation.error());
    attrs["filters"] = *filters;
    attrs["kernel"] = {kernel->h, kernel->w};
    attrs["stride"] = {stride->h, stride->w};
    if (auto ok = parse_padding(reader, attrs); !ok) return ok;
    // Added after format 1: written only when set, so older descriptions keep their hash.
    if (*groups != 1) attrs["groups"] = *groups;
    if (*dilation != Extent2{1, 1}) attrs["dilation"] = {dilation->h, dilation->w};
    return parse_trainable_options(reader, attrs, Initializer{InitKind::kGlorotUniform, 0.0});
}

Result<void> infer_conv(InferContext& context) {
    const ValueInfo& in = context.input(0);
    auto g = conv_geometry(context.attrs(), in);
    if (!g) return tl::unexpected(g.error());
    const Window2d& w = g->window;
    context.set_output(0, ValueInfo{{in.dims[0], Dim::of(g->filters), Dim::of(w.oh), Dim::of(w.ow)}});
    if (auto ok = context.tensor("w", {g->filters, g->in_channels / g->groups, w.kh, w.kw},
                                 attr_initializer(context.attrs(), "weight_init"));
        !ok)
        return ok;
    const double outputs = static_cast<double>(g->filters * w.oh * w.ow);
    context.add_flops(2.0 * static_cast<double>(g->in_channels / g->groups * w.kh * w.kw) * outputs);
    if (g->bias) {
        if (auto ok = context.tensor("b", {g->filters}, attr_initializer(context.attrs(), "bias_init")); !ok) return ok;
        context.add_flops(outputs);
    }
    return {};
}

Result<std::vector<std::int64_t>> pair_attr(OnnxNodeImport& node, const char* name, std::int64_t fallback) {
    auto v = node.ints_attr(name);
    if (!v) return tl::unexpected(v.error());
    if (!*v) return std::vector<std::int64_t>{fallback, fallback};
    if ((*v)->size() != 2) return tl::unexpected(node.refuse(std::string(name) + " must have 2 entries (a 2-D conv)"));
    return **v;
}

Result<void> import_conv(OnnxNodeImport& node) {
    const ValueInfo* x = node.info(0);
    if (x == nullptr || x->rank() != 4) return tl::unexpected(node.refuse("the input must be N x C x H x W"));
    std::vector<std::int64_t> w_dims;
    if (auto s = node.constant_shape(1)) w_dims = *s;
    else if (const ValueInfo* wi = node.info(1); wi && !has_batch(wi->dims)) w_dims = concrete(wi->dims, 1);
    if (w_dims.size() != 4) return tl::unexpected(node.refuse("the weights must be [O, I/groups, KH, KW]"));
    auto strides = pair_attr(node, "strides", 1);
    if (!strides) return tl::unexpected(strides.error());
    auto dilations = pair_attr(node, "dilations", 1);
    if (!dilations) return tl::unexpected(dilations.error());
    auto group = node.int_attr("group", 1);
    if (!group) return tl::unexpected(group.error());
    nlohmann::json layer = {{"kind", "conv2d"}, {"filters", w_dims[0]}, {"kernel", {w_dims[2], w_dims[3]}},
                            {"stride", *strides}, {"bias", node.has_input(2)}};
    auto input = node.value(0);
    if (!input) return tl::unexpected(input.error());
    layer["inputs"] = {*input};
    auto padding = import_padding(node);
    if (!padding) return tl::unexpected(padding.error());
    layer["padding"] = *padding;
    if (*group != 1) layer["groups"] = *group;
    if ((*dilations)[0] != 1 || (*dilations)[1] != 1) layer["dilation"] = *dilations;
    nlohmann::json tensors;
    auto w = node.slot(1);
    if (!w) return tl::unexpected(w.error());
    tensors["w"] = *w;
    if (node.has_input(2)) {
        auto b = node.slot(2);
        if (!b) return tl::unexpected(b.error());
        tensors["b"] = *b;
    }
    layer["tensors"] = tensors;
    auto name = node.emit(layer);
    if (!name) return tl::unexpected(name.error());
    node.bind_output(0, *name);
    return {};
}

Result<void> export_conv(OnnxNodeExport& out) {
    const Node& node = out.node();
    auto g = conv_geometry(node.attrs, out.model().value(node.inputs[0]));
    if (!g) return tl::unexpected(g.error());
    const Window2d& w = g->window;
    std::vector<std::string> inputs{out.input(0), out.input(1)};
    if (g->bias) inputs.push_back(out.input(2));
    out.add("Conv", inputs, {out.output(0)},
            {{"kernel_shape", std::vector<std::int64_t>{w.kh, w.kw}},
             {"strides", std::vector<std::int64_t>{w.sh, w.sw}},
             {"pads", std::vector<std::int64_t>{w.pt, w.pl, w.pb, w.pr}},
             {"dilations", std::vector<std::int64_t>{w.dh, w.dw}},
             {"group", g->groups}},
            node.name);
    return {};
}

}  // namespace

Result<ConvGeometry> conv_geometry(const nlohmann::json& attrs, const ValueInfo& in) {
    if (in.type != ElementType::kFloat || in.rank() != 4 || in.dims[1].batch || in.dims[2].batch || in.dims[3].batch)
        return tl::unexpected(op_error("expects an image N x C x H x W input, got " + to_string(in.dims) +
                                       (in.rank() == 2 ? " flat features (a dense layer came before)" : "")));
    ConvGeometry g;
    g.in_channels = in.dims[1].value;
    g.filters = attrs.at("filters").get<std::int64_t>();
    g.groups = attrs.value("groups", std::int64_t{1});
    g.bias = attrs.at("bias").get<bool>();
    if (g.in_channels % g.groups != 0 || g.filters % g.groups != 0)
        return tl::unexpected(op_error("groups " + std::to_string(g.groups) + " must divide the input channels (" +
                                       std::to_string(g.in_channels) + ") and the filters (" +
                                       std::to_string(g.filters) + ")"));
    const auto k = attrs.at("kernel").get<std::vector<std::int64_t>>();
    const auto s = attrs.at("stride").get<std::vector<std::int64_t>>();
    const auto d = attrs.value("dilation", std::vector<std::int64_t>{1, 1});
    auto w = plan_window(attrs.at("padding"), in.dims[2].value, in.dims[3].value, k[0], k[1], s[0], s[1], d[0], d[1],
                         false, "kernel");
    if (!w) return tl::unexpected(w.error());
    g.window = *w;
    if (!checked_product({g.filters, w->oh, w->ow}))
        return tl::unexpected(op_error("the output would have more than 2^31-1 elements per example"));
    return g;
}

const OpSchema& conv2d_schema() {
    static const OpSchema schema{"conv2d", 1, 1, parse_conv, infer_conv, {"Conv"}, import_conv, export_conv};
    return schema;
}

}  // namespace psrun::nn
