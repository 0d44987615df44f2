// random: {"kind": "random", "inputs": ["like"], "distribution": "normal", "mean": 0, "scale": 1}
//   or {"kind": "random", "inputs": ["like"], "distribution": "uniform", "low": 0, "high": 1}:
//   fresh noise of the input's dims (floats; the input's values are not read, only its dims),
//   drawn in every forward, training or not, as torch.randn_like / torch.rand_like do: a VAE's
//   reparameterisation (mu + sigma * eps), noise injection, torch.bernoulli(p) (written by the
//   exporter as rand_like(p) < p), Gumbel noise. normal: mean + scale * N(0, 1) (scale >= 0);
//   uniform: in [low, high) (low <= high). Values are counter-based on (the step's seed, the
//   layer's name, the element's index in the plain layout), as dropout's masks: one step's
//   noise is the same in every evaluation a gradient check makes of it. No gradient (the input
//   gets zeros where it needs one). No tensors. FLOPs: 1 per element.
// ONNX: RandomNormalLike (mean, scale), RandomUniformLike (low, high); dtype a float type (float,
// double, float16, bfloat16: the engine's float); seed not used (the step's seed is). Exported as
// the same nodes.
#include <cmath>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_random(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto distribution, reader.choice("distribution", std::nullopt, {"normal", "uniform"}));
    if (distribution == 0) {
        PSRUN_TRY_ASSIGN(auto mean, reader.number("mean", 0.0));
        PSRUN_TRY_ASSIGN(auto scale, reader.number("scale", 1.0));
        if (scale < 0.0)
            return tl::unexpected(reader.fail("scale", "expected a number >= 0, got " + describe_value(scale)));
        attrs["distribution"] = "normal";
        attrs["mean"] = mean;
        attrs["scale"] = scale;
        return {};
    }
    PSRUN_TRY_ASSIGN(auto low, reader.number("low", 0.0));
    PSRUN_TRY_ASSIGN(auto high, reader.number("high", 1.0));
    if (!(low <= high))
        return tl::unexpected(
            reader.fail("high", "expected a number >= low (" + describe_value(low) + "), got " + describe_value(high)));
    attrs["distribution"] = "uniform";
    attrs["low"] = low;
    attrs["high"] = high;
    return {};
}

Result<void> infer_random(InferContext& context) {
    const ValueInfo& like = context.input(0);
    context.set_output(0, ValueInfo{like.dims, ElementType::kFloat});
    context.add_flops(static_cast<double>(elements_per_example(like.dims).value_or(0)));
    return {};
}

Result<void> import_random(OnnxNodeImport& node) {
    if (node.has_attr("dtype")) {
        PSRUN_TRY_ASSIGN(auto dtype, node.int_attr("dtype", 1));
        // ONNX's float (1), float16 (10), double (11), bfloat16 (16).
        if (dtype != 1 && dtype != 10 && dtype != 11 && dtype != 16)
            return tl::unexpected(node.refuse("dtype " + std::to_string(dtype) +
                                              " is not a float type: the engine draws float noise only"));
    }
    PSRUN_TRY_ASSIGN(auto like, node.value(0));
    nlohmann::json layer = {{"kind", "random"}, {"inputs", {like}}};
    if (node.op_type() == "RandomNormalLike") {
        PSRUN_TRY_ASSIGN(auto mean, node.float_attr("mean", 0.0f));
        PSRUN_TRY_ASSIGN(auto scale, node.float_attr("scale", 1.0f));
        layer["distribution"] = "normal";
        layer["mean"] = mean;
        layer["scale"] = scale;
    } else {
        PSRUN_TRY_ASSIGN(auto low, node.float_attr("low", 0.0f));
        PSRUN_TRY_ASSIGN(auto high, node.float_attr("high", 1.0f));
        layer["distribution"] = "uniform";
        layer["low"] = low;
        layer["high"] = high;
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit(std::move(layer)));
    node.bind_output(0, name);
    return {};
}

Result<void> export_random(OnnxNodeExport& out) {
    const auto& a = out.node().attrs;
    const bool normal = a.at("distribution") == "normal";
    const auto number = [&a](const char* key) { return static_cast<float>(a.at(key).get<double>()); };
    std::vector<std::pair<std::string, OnnxAttr>> attrs = {{"dtype", std::int64_t{1}}};  // float
    if (normal) {
        attrs.emplace_back("mean", number("mean"));
        attrs.emplace_back("scale", number("scale"));
    } else {
        attrs.emplace_back("low", number("low"));
        attrs.emplace_back("high", number("high"));
    }
    out.add(normal ? "RandomNormalLike" : "RandomUniformLike", {out.input(0)}, {out.output(0)}, attrs);
    return {};
}

}  // namespace

const OpSchema& random_schema() {
    static const OpSchema schema{
        "random",     1, 1, parse_random, infer_random, {"RandomNormalLike", "RandomUniformLike"}, import_random,
        export_random};
    return schema;
}

}  // namespace psrun::nn
