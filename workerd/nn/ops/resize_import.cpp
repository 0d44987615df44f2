// ONNX Resize -> resize (resize.cpp): the output sizes from the scales or sizes input (constants
// at import, opset 18's axes mapped), then a check, axis by axis, that oneDNN's resampling reads
// the same source positions as the node's coordinate_transformation_mode (and nearest_mode)
// say for these sizes; anything else is refused naming the attribute.
#include <algorithm>
#include <cmath>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/resize.h"

namespace psrun::nn {

namespace {

using Ints = std::vector<std::int64_t>;

struct Modes {
    std::string mode, transform, nearest;
};

// ONNX's source coordinate of output o (before rounding and clamping); nullopt: an unknown mode.
std::optional<double> onnx_coordinate(const std::string& transform, std::int64_t o, std::int64_t in, std::int64_t out,
                                      double scale) {
    const auto x = static_cast<double>(o);
    if (transform == "half_pixel") return (x + 0.5) / scale - 0.5;
    if (transform == "pytorch_half_pixel") return out > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    if (transform == "asymmetric") return x / scale;
    if (transform == "tf_half_pixel_for_nn") return (x + 0.5) / scale;
    if (transform == "align_corners")
        return out == 1 ? 0.0 : x * static_cast<double>(in - 1) / static_cast<double>(out - 1);
    return std::nullopt;
}

double onnx_round(const std::string& nearest, double x) {
    const double f = std::floor(x);
    if (nearest == "floor") return f;
    if (nearest == "ceil") return std::ceil(x);
    if (x - f == 0.5) return nearest == "round_prefer_ceil" ? f + 1 : f;
    return std::round(x);
}

// Empty when axis `axis` (in -> out at ONNX scale `scale`) maps like oneDNN's; else why not.
std::string mismatch(const Modes& m, std::size_t axis, std::int64_t in, std::int64_t out, double scale) {
    const double last = static_cast<double>(in - 1);
    for (std::int64_t o = 0; o < out; ++o) {
        const auto x = onnx_coordinate(m.transform, o, in, out, scale);
        if (!x) return "coordinate_transformation_mode " + m.transform + " is not supported";
        // oneDNN: (o + 0.5) * in / out - 0.5 in float, clamped to the input.
        const float s = (static_cast<float>(o) + 0.5f) * static_cast<float>(in) / static_cast<float>(out) - 0.5f;
        double theirs = 0, ours = 0;
        if (m.mode == "nearest") {
            theirs = std::clamp(onnx_round(m.nearest, *x), 0.0, last);
            ours = std::clamp(static_cast<double>(std::round(s)), 0.0, last);
        } else {
            theirs = std::clamp(*x, 0.0, last);
            ours = std::clamp(static_cast<double>(s), 0.0, last);
        }
        if (std::fabs(theirs - ours) > 1e-5 * std::max(1.0, last)) {
            std::string what = "coordinate_transformation_mode " + m.transform;
            if (m.mode == "nearest") what += " with nearest_mode " + m.nearest;
            auto text = [](double v) {
                std::ostringstream text_out;
                text_out << v;
                return text_out.str();
            };
            return what + " from " + std::to_string(in) + " to " + std::to_string(out) + " on axis " +
                   std::to_string(axis) + " reads input " + text(theirs) + " for output " + std::to_string(o) +
                   ", oneDNN's resampling " + text(ours) +
                   ": not supported (nearest: asymmetric + floor at integer factors, or half_pixel + "
                   "round_prefer_ceil; linear: half_pixel)";
        }
    }
    return {};
}

}  // namespace

Result<void> import_resize(OnnxNodeImport& node) {
    const ValueInfo* x = node.info(0);
    if (x == nullptr || (x->rank() != 3 && x->rank() != 4))
        return tl::unexpected(node.refuse("the input must be N x C x L or N x C x H x W"));
    const std::size_t rank = x->rank();
    Modes m;
    for (auto [name, fallback, field] : {std::tuple{"mode", "nearest", &m.mode},
                                         std::tuple{"coordinate_transformation_mode", "half_pixel", &m.transform},
                                         std::tuple{"nearest_mode", "round_prefer_floor", &m.nearest}}) {
        auto v = node.string_attr(name, fallback);
        if (!v) return tl::unexpected(v.error());
        *field = *v;
    }
    if (m.mode != "nearest" && m.mode != "linear")
        return tl::unexpected(node.refuse("mode " + m.mode + " is not supported (nearest and linear are)"));
    auto antialias = node.int_attr("antialias", 0);
    if (!antialias) return tl::unexpected(antialias.error());
    auto policy = node.string_attr("keep_aspect_ratio_policy", "stretch");
    if (!policy) return tl::unexpected(policy.error());
    // Opset 18's axes: the scales or sizes name these axes only.
    Ints axes;
    auto axes_attr = node.ints_attr("axes");
    if (!axes_attr) return tl::unexpected(axes_attr.error());
    if (*axes_attr) {
        for (auto a : **axes_attr) axes.push_back(a < 0 ? a + static_cast<std::int64_t>(rank) : a);
    } else {
        for (std::size_t a = 0; a < rank; ++a) axes.push_back(static_cast<std::int64_t>(a));
    }
    std::vector<double> scales(rank, 1.0);
    Ints out(rank);
    for (std::size_t a = 0; a < rank; ++a) out[a] = a == 0 ? 0 : x->dims[a].value;
    const auto given_scales = node.has_input(2) ? node.floats(2) : std::nullopt;
    if (given_scales && !given_scales->empty()) {
        if (given_scales->size() != axes.size())
            return tl::unexpected(node.refuse("scales has " + std::to_string(given_scales->size()) + " entries for " +
                                              std::to_string(axes.size()) + " axes"));
        for (std::size_t i = 0; i < axes.size(); ++i) {
            const auto a = static_cast<std::size_t>(axes[i]);
            if (a >= rank) return tl::unexpected(node.refuse("axes " + std::to_string(axes[i]) + " is out of range"));
            scales[a] = (*given_scales)[i];
            // ONNX: floor(in * scale), in float.
            const float scaled = static_cast<float>(x->dims[a].value) * (*given_scales)[i];
            if (a > 0) out[a] = static_cast<std::int64_t>(std::floor(scaled));
        }
    } else if (node.has_input(3)) {
        const auto sizes = node.symbolic_ints(3);
        if (!sizes || sizes->size() != axes.size())
            return tl::unexpected(node.refuse("sizes must be a constant with one entry per axis"));
        if (*policy != "stretch")
            return tl::unexpected(
                node.refuse("keep_aspect_ratio_policy " + *policy + " is not supported (stretch is)"));
        for (std::size_t i = 0; i < axes.size(); ++i) {
            const auto a = static_cast<std::size_t>(axes[i]);
            if (a >= rank) return tl::unexpected(node.refuse("axes " + std::to_string(axes[i]) + " is out of range"));
            if (a == 0) continue;  // the batch: checked below through the scale
            if ((*sizes)[i].batch)
                return tl::unexpected(node.refuse("sizes scales a non-batch axis by the batch size"));
            out[a] = (*sizes)[i].value;
            scales[a] = static_cast<double>(out[a]) / static_cast<double>(x->dims[a].value);
        }
    } else {
        return tl::unexpected(node.refuse("scales or sizes must be a constant known at import"));
    }
    if (scales[0] != 1.0 || out[1] != x->dims[1].value)
        return tl::unexpected(
            node.refuse("only the spatial axes may be resized (the batch and channel axes keep their size)"));
    Ints sizes(out.begin() + 2, out.end());
    for (std::size_t a = 2; a < rank; ++a) {
        if (out[a] < 1) return tl::unexpected(node.refuse("the output would be empty"));
        if (*antialias != 0 && m.mode == "linear" && out[a] < x->dims[a].value)
            return tl::unexpected(node.refuse("antialias 1 when downsampling is not supported"));
        if (auto why = mismatch(m, a, x->dims[a].value, out[a], scales[a]); !why.empty())
            return tl::unexpected(node.refuse(why));
    }
    auto input = node.value(0);
    if (!input) return tl::unexpected(input.error());
    auto name = node.emit({{"kind", "resize"}, {"inputs", {*input}}, {"mode", m.mode}, {"sizes", sizes}});
    if (!name) return tl::unexpected(name.error());
    node.bind_output(0, *name);
    return {};
}

}  // namespace psrun::nn
