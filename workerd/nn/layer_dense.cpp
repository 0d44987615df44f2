// dense: {"kind": "dense", "units": N, "bias": true, "weight_init", "bias_init"}
// Any input; an image is flattened implicitly in TF's NHWC order: feature
// i = (h * W + w) * C + c. Output N flat features. Parameters: w [N, in_features] (oi: TF's
// kernel [in, N] transposed), b [N].
#include "workerd/nn/layer_spec.h"

namespace psrun::nn {

namespace {

Result<void> parse(FieldReader& reader, LayerSpec& layer) {
    auto units = reader.integer("units", std::nullopt, 1, kMaxTensorElements);
    if (!units) return tl::unexpected(units.error());
    layer.units = *units;
    return parse_trainable_options(reader, layer);
}

Result<void> infer(LayerSpec& layer) {
    const std::int64_t in = layer.input.elements();
    layer.output = ActivationShape{layer.units, 1, 1, true};
    auto w = make_param(layer.name + "/w", {layer.units, in}, layer.weight_init);
    if (!w) return tl::unexpected(w.error());
    layer.params = {*w};
    layer.param_count = w->size;
    layer.flops = 2.0 * static_cast<double>(w->size);
    if (layer.bias) {
        layer.params.push_back(ParamTensor{layer.name + "/b", {layer.units}, layer.units, layer.bias_init});
        layer.param_count += layer.units;
        layer.flops += static_cast<double>(layer.units);
    }
    return {};
}

void write(const LayerSpec& layer, nlohmann::json& out) {
    out["units"] = layer.units;
    write_trainable_options(layer, out);
}

}  // namespace

const LayerKindOps& dense_ops() {
    static const LayerKindOps ops{LayerKind::kDense, "dense", parse, infer, write};
    return ops;
}

}  // namespace psrun::nn
