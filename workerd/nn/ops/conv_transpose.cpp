// conv_transpose: {"kind": "conv_transpose", "filters": O, "kernel": k | [kh, kw] | [k] | [kd, kh, kw],
//                  "stride": 1, "padding": 0 | [top, left, bottom, right] | [left, right] |
//                  [front, top, left, back, bottom, right], "output_padding": 0, "dilation": 1,
//                  "groups": 1, "bias": true, "weight_init", "bias_init"}
// The transposed convolution (PyTorch's ConvTranspose1d/2d/3d, the gradient of conv2d w.r.t. its
// input): input N x I x H x W (or N x I x L: a kernel written [k] makes the node 1-D; or
// N x I x D x H x W: a kernel written [kd, kh, kw] makes it 3-D; then every other field has one
// entry per axis, or is one integer for all), output N x O x OH x OW with OH = (H - 1) * stride
// - top - bottom + dilation * (kernel - 1) + output_padding + 1 (so for W, and D). output_padding
// adds rows at the end (< stride); pads are at most dilation * (kernel - 1) and are in ONNX's
// order (the begins of every axis, then the ends). Tensors: w [I, O/g, KH, KW] (PyTorch's order;
// [I, O/g, K] in 1-D, [I, O/g, KD, KH, KW] in 3-D), b [O].
// ONNX: ConvTranspose (pads and output_padding; not output_shape, not auto_pad SAME_*).
#include "workerd/nn/ops/conv_transpose.h"

#include <algorithm>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"
#include "workerd/nn/ops/window.h"

namespace psrun::nn {

namespace {

using Ints = std::vector<std::int64_t>;

// An integer for every axis, or a list of `count` of them, each >= min.
Result<Ints> axes_field(FieldReader& reader, std::string_view field, std::size_t count,
                        std::optional<std::int64_t> fallback, std::int64_t min) {
    if (reader.has(field) && reader.raw(field).is_array())
        return reader.integers(field, std::nullopt, count, min, kMaxTensorElements);
    PSRUN_TRY_ASSIGN(auto v, reader.integer(field, fallback, min, kMaxTensorElements));
    return Ints(count, v);
}

Result<void> parse_conv_transpose(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto filters, reader.integer("filters", std::nullopt, 1, kMaxTensorElements));
    PSRUN_TRY_ASSIGN(auto groups, reader.integer("groups", 1, 1, kMaxTensorElements));
    const std::size_t spatial = is_1d_field(reader, "kernel") ? 1 : is_3d_field(reader, "kernel") ? 3 : 2;
    PSRUN_TRY_ASSIGN(auto kernel, axes_field(reader, "kernel", spatial, std::nullopt, 1));
    PSRUN_TRY_ASSIGN(auto stride, axes_field(reader, "stride", spatial, 1, 1));
    PSRUN_TRY_ASSIGN(auto dilation, axes_field(reader, "dilation", spatial, 1, 1));
    PSRUN_TRY_ASSIGN(auto padding, axes_field(reader, "padding", 2 * spatial, 0, 0));
    PSRUN_TRY_ASSIGN(auto output_padding, axes_field(reader, "output_padding", spatial, 0, 0));
    attrs["filters"] = filters;
    attrs["groups"] = groups;
    attrs["kernel"] = kernel;
    attrs["stride"] = stride;
    attrs["dilation"] = dilation;
    attrs["padding"] = padding;
    attrs["output_padding"] = output_padding;
    return parse_trainable_options(reader, attrs, Initializer{InitKind::kGlorotUniform, 0.0});
}

Result<void> infer_conv_transpose(InferContext& context) {
    const ValueInfo& in = context.input(0);
    PSRUN_TRY_ASSIGN(auto g, conv_transpose_geometry(context.attrs(), in));
    Dims out{in.dims[0], Dim::of(g.filters)};
    double in_size = 1, out_size = 1, window = 1;
    for (int i = 0; i < g.spatial; ++i) {
        out.push_back(Dim::of(g.out[i]));
        in_size *= static_cast<double>(g.in[i]);
        out_size *= static_cast<double>(g.out[i]);
        window *= static_cast<double>(g.kernel[i]);
    }
    context.set_output(0, ValueInfo{out});
    if (auto ok = context.tensor("w", conv_transpose_weight_dims(g), attr_initializer(context.attrs(), "weight_init"));
        !ok)
        return ok;
    context.add_flops(2.0 * static_cast<double>(g.in_channels * (g.filters / g.groups)) * window * in_size);
    if (g.bias) {
        if (auto ok = context.tensor("b", {g.filters}, attr_initializer(context.attrs(), "bias_init")); !ok) return ok;
        context.add_flops(static_cast<double>(g.filters) * out_size);
    }
    return {};
}

Result<void> import_conv_transpose(OnnxNodeImport& node) {
    Ints w_dims;
    if (auto s = node.constant_shape(1)) w_dims = *s;
    else if (const ValueInfo* wi = node.info(1); wi && !has_batch(wi->dims)) w_dims = concrete(wi->dims, 1);
    if (w_dims.size() < 3 || w_dims.size() > 5)
        return tl::unexpected(
            node.refuse("the weights must be [I, O/groups, KH, KW], [I, O/groups, K] or [I, O/groups, KD, KH, KW]"));
    const std::size_t spatial = w_dims.size() - 2;
    const ValueInfo* x = node.info(0);
    if (x == nullptr || x->rank() != spatial + 2)
        return tl::unexpected(node.refuse(spatial == 2   ? "the input must be N x C x H x W (2-D weights)"
                                          : spatial == 3 ? "the input must be N x C x D x H x W (3-D weights)"
                                                         : "the input must be N x C x L (1-D weights)"));
    if (node.has_attr("output_shape"))
        return tl::unexpected(node.refuse("output_shape is not supported: give pads and output_padding"));
    PSRUN_TRY_ASSIGN(auto auto_pad, node.string_attr("auto_pad", "NOTSET"));
    if (auto_pad != "NOTSET" && auto_pad != "VALID")
        return tl::unexpected(node.refuse("auto_pad " + auto_pad + " is not supported (NOTSET and VALID are)"));
    PSRUN_TRY_ASSIGN(auto strides, spatial_attr(node, "strides", spatial, 1));
    PSRUN_TRY_ASSIGN(auto dilations, spatial_attr(node, "dilations", spatial, 1));
    PSRUN_TRY_ASSIGN(auto output_padding, spatial_attr(node, "output_padding", spatial, 0));
    Ints pads(2 * spatial, 0);
    if (auto_pad == "NOTSET") {
        PSRUN_TRY_ASSIGN(auto p, spatial_attr(node, "pads", 2 * spatial, 0));
        pads = p;
    }
    PSRUN_TRY_ASSIGN(auto group, node.int_attr("group", 1));
    PSRUN_TRY_ASSIGN(auto input, node.value(0));
    nlohmann::json layer = {{"kind", "conv_transpose"},
                            {"inputs", {input}},
                            {"filters", w_dims[1] * group},
                            {"kernel", Ints(w_dims.begin() + 2, w_dims.end())},
                            {"stride", strides},
                            {"dilation", dilations},
                            {"padding", pads},
                            {"output_padding", output_padding},
                            {"groups", group},
                            {"bias", node.has_input(2)}};
    return node.emit_weighted(std::move(layer));
}

Result<void> export_conv_transpose(OnnxNodeExport& out) {
    const Node& node = out.node();
    PSRUN_TRY_ASSIGN(auto g, conv_transpose_geometry(node.attrs, out.model().value(node.inputs[0])));
    std::vector<std::string> inputs{out.input(0), out.input(1)};
    if (g.bias) inputs.push_back(out.input(2));
    Ints pads = g.pad_begin;
    pads.insert(pads.end(), g.pad_end.begin(), g.pad_end.end());
    out.add("ConvTranspose", inputs, {out.output(0)},
            {{"kernel_shape", g.kernel},
             {"strides", g.stride},
             {"pads", pads},
             {"dilations", g.dilation},
             {"output_padding", g.output_padding},
             {"group", g.groups}},
            node.name);
    return {};
}

}  // namespace

Result<ConvTransposeGeometry> conv_transpose_geometry(const nlohmann::json& attrs, const ValueInfo& in) {
    ConvTransposeGeometry g;
    g.kernel = attrs.at("kernel").get<Ints>();
    g.spatial = static_cast<int>(g.kernel.size());
    bool ok = in.type == ElementType::kFloat && in.rank() == g.kernel.size() + 2;
    for (std::size_t i = 1; ok && i < in.rank(); ++i) ok = !in.dims[i].batch;
    if (!ok)
        return tl::unexpected(op_error(std::string(g.spatial == 1   ? "a 1-D kernel expects an N x C x L"
                                                   : g.spatial == 3 ? "a 3-D kernel expects an N x C x D x H x W"
                                                                    : "a 2-D kernel expects an N x C x H x W") +
                                       " input, got " + to_string(in.dims)));
    g.in_channels = in.dims[1].value;
    g.filters = attrs.at("filters").get<std::int64_t>();
    g.groups = attrs.at("groups").get<std::int64_t>();
    g.bias = attrs.at("bias").get<bool>();
    if (g.in_channels % g.groups != 0 || g.filters % g.groups != 0)
        return tl::unexpected(op_error("groups " + std::to_string(g.groups) + " must divide the input channels (" +
                                       std::to_string(g.in_channels) + ") and the filters (" +
                                       std::to_string(g.filters) + ")"));
    g.stride = attrs.at("stride").get<Ints>();
    g.dilation = attrs.at("dilation").get<Ints>();
    g.output_padding = attrs.at("output_padding").get<Ints>();
    const auto pads = attrs.at("padding").get<Ints>();
    const auto n = static_cast<std::size_t>(g.spatial);
    g.pad_begin.assign(pads.begin(), pads.begin() + static_cast<std::ptrdiff_t>(n));
    g.pad_end.assign(pads.begin() + static_cast<std::ptrdiff_t>(n), pads.end());
    for (std::size_t i = 0; i < n; ++i) {
        const std::int64_t in_size = in.dims[i + 2].value, reach = g.dilation[i] * (g.kernel[i] - 1);
        if (g.output_padding[i] >= g.stride[i])
            return tl::unexpected(op_error("output_padding " + std::to_string(g.output_padding[i]) +
                                           " must be smaller than the stride " + std::to_string(g.stride[i])));
        if (g.pad_begin[i] > reach || g.pad_end[i] > reach)
            return tl::unexpected(op_error("padding " + std::to_string(std::max(g.pad_begin[i], g.pad_end[i])) +
                                           " with a kernel " + std::to_string(g.kernel[i]) + " (dilation " +
                                           std::to_string(g.dilation[i]) + "): a pad must be at most " +
                                           std::to_string(reach)));
        const std::int64_t out =
            (in_size - 1) * g.stride[i] - g.pad_begin[i] - g.pad_end[i] + reach + g.output_padding[i] + 1;
        if (out < 1) return tl::unexpected(op_error("the output would be empty"));
        g.in.push_back(in_size);
        g.out.push_back(out);
    }
    if (!checked_product({g.filters, g.out[0], n >= 2 ? g.out[1] : 1, n == 3 ? g.out[2] : 1}))
        return tl::unexpected(op_error("the output would have more than 2^31-1 elements per example"));
    return g;
}

Ints conv_transpose_weight_dims(const ConvTransposeGeometry& g) {
    Ints dims{g.in_channels, g.filters / g.groups};
    dims.insert(dims.end(), g.kernel.begin(), g.kernel.end());
    return dims;
}

namespace {

// Every weight once per input position.
TrainingMacs conv_transpose_macs(const MacsContext& c) {
    const TensorDef* w = c.slot_tensor(0);
    if (w == nullptr) return {};
    const auto& in = c.model.value(c.node.inputs.front()).dims;
    const double channels = static_cast<double>(in.size() > 1 ? in[1].value : 1);
    return c.weighted(static_cast<double>(w->size) * MacsContext::per_example(in, false) / channels);
}

}  // namespace

const OpSchema& conv_transpose_schema() {
    static const OpSchema schema{"conv_transpose",
                                 1,
                                 1,
                                 parse_conv_transpose,
                                 infer_conv_transpose,
                                 {"ConvTranspose"},
                                 import_conv_transpose,
                                 export_conv_transpose,
                                 true,
                                 conv_transpose_macs};
    return schema;
}

}  // namespace psrun::nn
