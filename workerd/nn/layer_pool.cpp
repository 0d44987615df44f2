// max_pool, avg_pool: {"kind": "max_pool", "window": k | [kh, kw], "stride": window (default)
//                      | s | [sh, sw], "padding": "valid" (default) | "same"}
// Per channel; output C x OH x OW by TF's rules (shape.h). With same padding the padded
// positions take no part (TF: max ignores them, avg divides by the count of real inputs).
// No parameters.
#include "workerd/nn/layer_spec.h"

namespace psrun::nn {

namespace {

std::string extent_text(const Extent2& e) { return std::to_string(e.h) + "x" + std::to_string(e.w); }

std::string stride_text(const Extent2& e) { return e.h == e.w ? std::to_string(e.h) : extent_text(e); }

Result<void> parse(FieldReader& reader, LayerSpec& layer) {
    auto window = reader.extent("window", std::nullopt, kMaxTensorElements);
    if (!window) return tl::unexpected(window.error());
    auto stride = reader.extent("stride", *window, kMaxTensorElements);
    if (!stride) return tl::unexpected(stride.error());
    auto padding = reader.choice("padding", 0, {"valid", "same"});
    if (!padding) return tl::unexpected(padding.error());
    layer.kernel = *window;
    layer.stride = *stride;
    layer.padding = *padding == 1 ? Padding::kSame : Padding::kValid;
    return {};
}

Result<void> infer(LayerSpec& layer) {
    const auto& in = layer.input;
    if (in.flat)
        return tl::unexpected(layer_error("expects an image (C x H x W) input, got " + in.to_string() +
                                          " flat features (a dense layer came before)"));
    const auto& k = layer.kernel;
    if (layer.padding == Padding::kValid && (k.h > in.height || k.w > in.width))
        return tl::unexpected(layer_error("window " + extent_text(k) + " stride " + stride_text(layer.stride) +
                                          " on a " + std::to_string(in.height) + "x" + std::to_string(in.width) +
                                          " input: the output would be empty"));
    const AxisPlan rows = plan_axis(in.height, k.h, layer.stride.h, layer.padding);
    const AxisPlan cols = plan_axis(in.width, k.w, layer.stride.w, layer.padding);
    layer.pads = Pads{rows.pad_before, rows.pad_after, cols.pad_before, cols.pad_after};
    layer.output = ActivationShape{in.channels, rows.out, cols.out, false};
    layer.params.clear();
    layer.param_count = 0;
    layer.flops = static_cast<double>(layer.output.elements()) * static_cast<double>(k.h) * static_cast<double>(k.w);
    return {};
}

void write(const LayerSpec& layer, nlohmann::json& out) {
    out["window"] = {layer.kernel.h, layer.kernel.w};
    out["stride"] = {layer.stride.h, layer.stride.w};
    out["padding"] = to_string(layer.padding);
}

}  // namespace

const LayerKindOps& max_pool_ops() {
    static const LayerKindOps ops{LayerKind::kMaxPool, "max_pool", parse, infer, write};
    return ops;
}

const LayerKindOps& avg_pool_ops() {
    static const LayerKindOps ops{LayerKind::kAvgPool, "avg_pool", parse, infer, write};
    return ops;
}

}  // namespace psrun::nn
