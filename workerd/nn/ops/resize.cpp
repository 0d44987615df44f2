// resize: {"kind": "resize", "mode": "nearest" (default) | "linear",
//          "scales": s | [s] | [sh, sw]  or  "sizes": [ol] | [oh, ow]}
// Up- or down-sampling of N x C x L or N x C x H x W (per channel, per example) to
// N x C x OL (OH x OW): sizes as given, or floor(in * scale) per axis (one number: every
// spatial axis). oneDNN's resampling, with F = out / in per axis:
//   nearest: out[o] = in[round((o + 0.5) / F - 0.5)] (halves rounded up), which is
//            PyTorch's nn.Upsample(mode='nearest') for integer factors;
//   linear:  out[o] interpolates in at (o + 0.5) / F - 0.5 clamped to [0, in - 1] (half-pixel
//            centres, edges repeated): F.interpolate(mode='linear'/'bilinear',
//            align_corners=False).
// No tensors. ONNX: Resize (opsets 11-18: scales or sizes as constants, axes; the coordinate
// mode and nearest rounding are accepted where they pick the same source positions as the
// above for the node's sizes, refused otherwise); exported as Resize (opset 13).
#include "workerd/nn/ops/resize.h"

#include <cmath>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"
#include "workerd/nn/ops/window.h"

namespace psrun::nn {

namespace {

using Ints = std::vector<std::int64_t>;

Result<void> parse_resize(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto mode, reader.choice("mode", 0, {"nearest", "linear"}));
    attrs["mode"] = mode == 1 ? "linear" : "nearest";
    if (reader.has("sizes")) {
        if (reader.has("scales")) return tl::unexpected(reader.fail("scales", "give scales or sizes, not both"));
        PSRUN_TRY_ASSIGN(auto sizes, reader.integers("sizes", std::nullopt, 0, 1, kMaxTensorElements));
        attrs["sizes"] = sizes;
        return {};
    }
    if (reader.has("scales") && reader.raw("scales").is_array()) {
        const auto& v = reader.raw("scales");
        nlohmann::json scales = nlohmann::json::array();
        for (const auto& e : v) {
            if (!e.is_number() || !std::isfinite(e.get<double>()) || e.get<double>() <= 0)
                return tl::unexpected(reader.fail("scales", "expected positive numbers, got " + describe_value(v)));
            scales.push_back(e.get<double>());
        }
        attrs["scales"] = scales;
        return {};
    }
    PSRUN_TRY_ASSIGN(auto scale, reader.number("scales", std::nullopt));
    if (scale <= 0) return tl::unexpected(reader.fail("scales", "expected a positive number"));
    attrs["scales"] = scale;
    return {};
}

Result<void> infer_resize(InferContext& context) {
    const ValueInfo& in = context.input(0);
    PSRUN_TRY_ASSIGN(auto sizes, resize_out_dims(context.attrs(), in));
    Dims out{in.dims[0], in.dims[1]};
    double elements = static_cast<double>(in.dims[1].value);
    for (const auto s : sizes) {
        out.push_back(Dim::of(s));
        elements *= static_cast<double>(s);
    }
    context.set_output(0, ValueInfo{out});
    const bool linear = context.attr_string("mode") == "linear";
    context.add_flops(elements * (linear ? 3.0 * static_cast<double>(sizes.size()) : 1.0));
    return {};
}

Result<void> export_resize(OnnxNodeExport& out) {
    const Node& node = out.node();
    const ValueInfo& in = out.model().value(node.inputs[0]);
    PSRUN_TRY_ASSIGN(auto sizes, resize_out_dims(node.attrs, in));
    // Full-rank scales out / in, nudged up where float rounding would make ONNX's
    // floor(in * scale) one short.
    std::vector<float> scales{1.0f, 1.0f};
    bool integer_up = true;
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        const std::int64_t from = in.dims[i + 2].value, to = sizes[i];
        float s = static_cast<float>(to) / static_cast<float>(from);
        while (std::floor(static_cast<float>(from) * s) < static_cast<float>(to)) s = std::nextafter(s, 2.0f * s);
        scales.push_back(s);
        integer_up = integer_up && to % from == 0;
    }
    const std::string scales_name = out.fresh(node.name + "/scales");
    out.constant_node(scales_name, {static_cast<std::int64_t>(scales.size())}, scales, "");
    const bool linear = node.attrs.at("mode").get<std::string>() == "linear";
    std::vector<std::pair<std::string, OnnxAttr>> attrs{{"mode", std::string(linear ? "linear" : "nearest")}};
    if (linear) {
        attrs.emplace_back("coordinate_transformation_mode", std::string("half_pixel"));
    } else if (integer_up) {  // what PyTorch writes for nn.Upsample(mode='nearest')
        attrs.emplace_back("coordinate_transformation_mode", std::string("asymmetric"));
        attrs.emplace_back("nearest_mode", std::string("floor"));
    } else {
        attrs.emplace_back("coordinate_transformation_mode", std::string("half_pixel"));
        attrs.emplace_back("nearest_mode", std::string("round_prefer_ceil"));
    }
    out.add("Resize", {out.input(0), "", scales_name}, {out.output(0)}, attrs, node.name);
    return {};
}

}  // namespace

Result<std::vector<std::int64_t>> resize_out_dims(const nlohmann::json& attrs, const ValueInfo& in) {
    bool ok = in.type == ElementType::kFloat && (in.rank() == 3 || in.rank() == 4);
    for (std::size_t i = 1; ok && i < in.rank(); ++i) ok = !in.dims[i].batch;
    if (!ok) return tl::unexpected(op_error("expects an N x C x L or N x C x H x W input, got " + to_string(in.dims)));
    const std::size_t spatial = in.rank() - 2;
    Ints out;
    if (attrs.contains("sizes")) {
        out = attrs.at("sizes").get<Ints>();
        if (out.size() != spatial)
            return tl::unexpected(op_error(std::to_string(out.size()) + " sizes for " + to_string(in.dims) + "; give " +
                                           std::to_string(spatial)));
    } else {
        const auto& s = attrs.at("scales");
        const std::vector<double> scales =
            s.is_array() ? s.get<std::vector<double>>() : std::vector<double>(spatial, s.get<double>());
        if (scales.size() != spatial)
            return tl::unexpected(op_error(std::to_string(scales.size()) + " scales for " + to_string(in.dims) +
                                           "; give " + std::to_string(spatial)));
        for (std::size_t i = 0; i < spatial; ++i)
            out.push_back(static_cast<std::int64_t>(std::floor(static_cast<double>(in.dims[i + 2].value) * scales[i])));
    }
    for (const auto o : out)
        if (o < 1) return tl::unexpected(op_error("the output of " + to_string(in.dims) + " would be empty"));
    if (!checked_product({in.dims[1].value, out[0], spatial == 2 ? out[1] : 1}))
        return tl::unexpected(op_error("the output would have more than 2^31-1 elements per example"));
    return out;
}

const OpSchema& resize_schema() {
    static const OpSchema schema{"resize", 1, 1, parse_resize, infer_resize, {"Resize"}, import_resize, export_resize};
    return schema;
}

}  // namespace psrun::nn
