// conv2d: {"kind": "conv2d", "filters": O, "kernel": k | [kh, kw], "stride": 1 | [sh, sw],
//          "padding": "valid" (default) | "same", "bias": true, "weight_init", "bias_init"}
// Input an image I x H x W; output O x OH x OW by TF's rules (shape.h). Cross-correlation as
// in TF. Parameters: w [O, I, KH, KW], b [O].
#include "workerd/nn/layer_spec.h"

namespace psrun::nn {

namespace {

std::string extent_text(const Extent2& e) { return std::to_string(e.h) + "x" + std::to_string(e.w); }

Result<void> parse(FieldReader& reader, LayerSpec& layer) {
    auto filters = reader.integer("filters", std::nullopt, 1, kMaxTensorElements);
    if (!filters) return tl::unexpected(filters.error());
    auto kernel = reader.extent("kernel", std::nullopt, kMaxTensorElements);
    if (!kernel) return tl::unexpected(kernel.error());
    auto stride = reader.extent("stride", Extent2{1, 1}, kMaxTensorElements);
    if (!stride) return tl::unexpected(stride.error());
    auto padding = reader.choice("padding", 0, {"valid", "same"});
    if (!padding) return tl::unexpected(padding.error());
    layer.filters = *filters;
    layer.kernel = *kernel;
    layer.stride = *stride;
    layer.padding = *padding == 1 ? Padding::kSame : Padding::kValid;
    return parse_trainable_options(reader, layer);
}

Result<void> infer(LayerSpec& layer) {
    const auto& in = layer.input;
    if (in.flat)
        return tl::unexpected(layer_error("expects an image (C x H x W) input, got " + in.to_string() +
                                          " flat features (a dense layer came before)"));
    const auto& k = layer.kernel;
    if (layer.padding == Padding::kValid && (k.h > in.height || k.w > in.width))
        return tl::unexpected(layer_error("kernel " + extent_text(k) + " with padding valid on a " +
                                          std::to_string(in.height) + "x" + std::to_string(in.width) +
                                          " input: the kernel is larger than the input, the output would be empty"));
    const AxisPlan rows = plan_axis(in.height, k.h, layer.stride.h, layer.padding);
    const AxisPlan cols = plan_axis(in.width, k.w, layer.stride.w, layer.padding);
    layer.pads = Pads{rows.pad_before, rows.pad_after, cols.pad_before, cols.pad_after};
    layer.output = ActivationShape{layer.filters, rows.out, cols.out, false};
    if (!checked_product({layer.filters, rows.out, cols.out}))
        return tl::unexpected(layer_error("output " + layer.output.to_string() + " would have more than 2^31-1 elements"));
    auto w = make_param(layer.name + "/w", {layer.filters, in.channels, k.h, k.w}, layer.weight_init);
    if (!w) return tl::unexpected(w.error());
    layer.params = {*w};
    layer.param_count = w->size;
    const double outputs = static_cast<double>(layer.output.elements());
    layer.flops = 2.0 * static_cast<double>(in.channels * k.h * k.w) * outputs;
    if (layer.bias) {
        layer.params.push_back(ParamTensor{layer.name + "/b", {layer.filters}, layer.filters, layer.bias_init});
        layer.param_count += layer.filters;
        layer.flops += outputs;
    }
    return {};
}

void write(const LayerSpec& layer, nlohmann::json& out) {
    out["filters"] = layer.filters;
    out["kernel"] = {layer.kernel.h, layer.kernel.w};
    out["stride"] = {layer.stride.h, layer.stride.w};
    out["padding"] = to_string(layer.padding);
    write_trainable_options(layer, out);
}

}  // namespace

const LayerKindOps& conv2d_ops() {
    static const LayerKindOps ops{LayerKind::kConv2d, "conv2d", parse, infer, write};
    return ops;
}

}  // namespace psrun::nn
