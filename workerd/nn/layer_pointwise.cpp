// Element-wise layers, output shape = input shape, no parameters:
//   {"kind": "relu"}, {"kind": "tanh"}, {"kind": "sigmoid"},
//   {"kind": "dropout", "keep_prob": p} or {"kind": "dropout", "rate": r}: exactly one;
//   keep_prob in (0, 1], rate = 1 - keep_prob in [0, 1). Training keeps each element with
//   probability keep_prob and scales it by 1/keep_prob (TF's tf.nn.dropout); evaluation passes
//   the input through.
#include "workerd/nn/layer_spec.h"

namespace psrun::nn {

namespace {

Result<void> parse_none(FieldReader&, LayerSpec&) { return {}; }

Result<void> parse_dropout(FieldReader& reader, LayerSpec& layer) {
    const bool keep = reader.has("keep_prob");
    const bool rate = reader.has("rate");
    if (keep && rate)
        return tl::unexpected(reader.fail("rate", "give either \"keep_prob\" or \"rate\", not both"));
    if (!keep && !rate)
        return tl::unexpected(reader.fail("keep_prob", "missing: give \"keep_prob\" (TF 1.x) or \"rate\" (Keras)"));
    const std::string_view field = keep ? "keep_prob" : "rate";
    auto value = reader.number(field, std::nullopt);
    if (!value) return tl::unexpected(value.error());
    if (keep && !(*value > 0.0 && *value <= 1.0))
        return tl::unexpected(reader.fail(field, "expected a number in (0, 1], got " + describe_value(*value)));
    if (rate && !(*value >= 0.0 && *value < 1.0))
        return tl::unexpected(reader.fail(field, "expected a number in [0, 1), got " + describe_value(*value)));
    layer.keep_prob = keep ? *value : 1.0 - *value;
    return {};
}

Result<void> infer(LayerSpec& layer) {
    layer.output = layer.input;
    layer.params.clear();
    layer.param_count = 0;
    layer.flops = static_cast<double>(layer.input.elements());
    return {};
}

void write_none(const LayerSpec&, nlohmann::json&) {}

void write_dropout(const LayerSpec& layer, nlohmann::json& out) { out["keep_prob"] = layer.keep_prob; }

}  // namespace

const LayerKindOps& relu_ops() {
    static const LayerKindOps ops{LayerKind::kRelu, "relu", parse_none, infer, write_none};
    return ops;
}

const LayerKindOps& tanh_ops() {
    static const LayerKindOps ops{LayerKind::kTanh, "tanh", parse_none, infer, write_none};
    return ops;
}

const LayerKindOps& sigmoid_ops() {
    static const LayerKindOps ops{LayerKind::kSigmoid, "sigmoid", parse_none, infer, write_none};
    return ops;
}

const LayerKindOps& dropout_ops() {
    static const LayerKindOps ops{LayerKind::kDropout, "dropout", parse_dropout, infer, write_dropout};
    return ops;
}

}  // namespace psrun::nn
