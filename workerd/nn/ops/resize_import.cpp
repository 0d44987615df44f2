// ONNX Resize -> resize (resize.cpp): the output sizes from the scales or sizes input (constants
// at import, opset 18's axes mapped), then a check, axis by axis, that oneDNN's resampling reads
// the same source positions as the node's coordinate_transformation_mode (and nearest_mode)
// say for these sizes. Where it does not (align_corners, nearest at a non-integer factor, cubic
// or any other mode), the node is imported as what it is, a linear map per axis: a matmul with a
// constant [in, out] matrix of ONNX's interpolation weights for that axis (transposed to the
// last axis and back), so every mode and coordinate transform trains, at the cost of a dense
// product over each resized axis. Refused, naming the attribute: tf_crop_and_resize, antialias
// when downsampling, a matrix over 2^24 entries.
#include <algorithm>
#include <cmath>
#include <optional>
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
    double cubic_a = -0.75;
    bool exclude_outside = false;
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

// True when oneDNN's resampling reads, for every output of an axis (in -> out at ONNX scale
// `scale`), the source position ONNX's coordinate transform (and rounding) gives.
constexpr std::int64_t kMaxResizedAxis = 65536;
constexpr std::int64_t kMaxResizeMatrix = std::int64_t{1} << 24;

bool onednn_reads_same(const Modes& m, std::int64_t in, std::int64_t out, double scale) {
    const double last = static_cast<double>(in - 1);
    for (std::int64_t o = 0; o < out; ++o) {
        const auto x = onnx_coordinate(m.transform, o, in, out, scale);
        if (!x) return false;
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
        if (std::fabs(theirs - ours) > 1e-5 * std::max(1.0, last)) return false;
    }
    return true;
}

// ONNX's interpolation weights along one axis as W [in, out], row-major: output o is
// sum_i x[i] * W[i][o] (onnx/reference/ops/op_resize.py). Nearest: a 1 at the rounded coordinate,
// clamped; linear: floor(x) and floor(x) + 1 of the coordinate clamped to [0, in - 1]; cubic:
// floor(x) - 1 .. floor(x) + 2 with Keys' kernel of coefficient a, indices clamped to the edge,
// or with exclude_outside the taps outside dropped and the rest renormalised. Empty (and `why`
// set) for a coordinate transform this cannot compute.
std::vector<float> resize_axis_weights(const Modes& m, std::int64_t in, std::int64_t out, double scale,
                                       std::string& why) {
    std::vector<double> w(static_cast<std::size_t>(in * out), 0.0);
    const auto put = [&](std::int64_t i, std::int64_t o, double v) {
        w[static_cast<std::size_t>(std::clamp<std::int64_t>(i, 0, in - 1) * out + o)] += v;
    };
    const double last = static_cast<double>(in - 1);
    for (std::int64_t o = 0; o < out; ++o) {
        const auto x = onnx_coordinate(m.transform, o, in, out, scale);
        if (!x) {
            why = "coordinate_transformation_mode " + m.transform + " is not supported";
            return {};
        }
        if (m.mode == "nearest") {
            put(static_cast<std::int64_t>(std::clamp(onnx_round(m.nearest, *x), 0.0, last)), o, 1.0);
        } else if (m.mode == "linear") {
            const double c = std::clamp(*x, 0.0, last), f = std::floor(c), r = c - f;
            put(static_cast<std::int64_t>(f), o, 1.0 - r);
            put(static_cast<std::int64_t>(f) + 1, o, r);
        } else {
            const double f = std::floor(*x), r = *x - f, a = m.cubic_a;
            const double d[4] = {r + 1, r, 1 - r, 2 - r};  // distances of floor - 1 .. floor + 2
            double taps[4], kept = 0;
            for (int k = 0; k < 4; ++k) {
                const double t = d[k];
                taps[k] = t <= 1 ? ((a + 2) * t - (a + 3)) * t * t + 1 : ((a * t - 5 * a) * t + 8 * a) * t - 4 * a;
                const auto i = static_cast<std::int64_t>(f) - 1 + k;
                if (m.exclude_outside && (i < 0 || i >= in)) taps[k] = 0;
                kept += taps[k];
            }
            for (int k = 0; k < 4; ++k)
                put(static_cast<std::int64_t>(f) - 1 + k, o, m.exclude_outside && kept != 0 ? taps[k] / kept : taps[k]);
        }
    }
    return {w.begin(), w.end()};
}

// Emits x resized along each spatial axis a whose out[a] or weights differ from the identity
// (see resize_axis_weights), the last axis first; returns the resized value.
Result<std::string> emit_resize_matrices(OnnxNodeImport& node, std::string x, const ValueInfo& in, const Modes& m,
                                         const Ints& out, const std::vector<double>& scales) {
    const auto rank = static_cast<std::int64_t>(in.rank());
    for (std::int64_t a = rank - 1; a >= 2; --a) {
        const std::int64_t n = in.dims[static_cast<std::size_t>(a)].value, o = out[static_cast<std::size_t>(a)];
        if (o > (std::int64_t{1} << 24) / std::max<std::int64_t>(n, 1))  // n * o, without overflowing
            return tl::unexpected(node.refuse("resizing axis " + std::to_string(a) + " from " + std::to_string(n) +
                                              " to " + std::to_string(o) + " needs a " + std::to_string(n) + " x " +
                                              std::to_string(o) +
                                              " interpolation matrix, over the 2^24 entries the "
                                              "importer builds"));
        std::string why;
        auto w = resize_axis_weights(m, n, o, scales[static_cast<std::size_t>(a)], why);
        if (w.empty()) return tl::unexpected(node.refuse(why));
        bool identity = n == o;
        for (std::int64_t i = 0; identity && i < n; ++i)
            for (std::int64_t j = 0; identity && j < o; ++j)
                identity = w[static_cast<std::size_t>(i * o + j)] == (i == j ? 1.0f : 0.0f);
        if (identity) continue;
        PSRUN_TRY_ASSIGN(auto matrix,
                         node.emit({{"kind", "constant"}, {"shape", {n, o}}, {"type", "float"}, {"values", w}}));
        Ints perm;  // axis a and the last swapped (its own inverse)
        for (std::int64_t d = 0; d < rank; ++d) perm.push_back(d == a ? rank - 1 : d == rank - 1 ? a : d);
        if (a != rank - 1) {
            PSRUN_TRY_ASSIGN(auto moved, node.emit({{"kind", "transpose"}, {"inputs", {x}}, {"perm", perm}}));
            x = moved;
        }
        PSRUN_TRY_ASSIGN(auto product, node.emit({{"kind", "matmul"}, {"inputs", {x, matrix}}}));
        x = product;
        if (a != rank - 1) {
            PSRUN_TRY_ASSIGN(auto back, node.emit({{"kind", "transpose"}, {"inputs", {x}}, {"perm", perm}}));
            x = back;
        }
    }
    return x;
}

}  // namespace

Result<void> import_resize(OnnxNodeImport& node) {
    // The input first: a parameter (ViT's position table interpolated to the image's grid,
    // [1, C, H, W]) is a value only once it is made one.
    PSRUN_TRY_ASSIGN(auto input, node.value(0));
    const ValueInfo* x = node.info(0);
    if (x == nullptr || x->rank() < 3 || x->rank() > 5)
        return tl::unexpected(node.refuse("the input must be N x C x L, N x C x H x W or N x C x D x H x W"));
    const std::size_t rank = x->rank();
    Modes m;
    for (auto [name, fallback, field] : {std::tuple{"mode", "nearest", &m.mode},
                                         std::tuple{"coordinate_transformation_mode", "half_pixel", &m.transform},
                                         std::tuple{"nearest_mode", "round_prefer_floor", &m.nearest}}) {
        PSRUN_TRY_ASSIGN(auto v, node.string_attr(name, fallback));
        *field = v;
    }
    if (m.mode != "nearest" && m.mode != "linear" && m.mode != "cubic")
        return tl::unexpected(node.refuse("mode " + m.mode + " is none of nearest, linear and cubic"));
    auto cubic_a = node.float_attr("cubic_coeff_a", -0.75f);
    auto exclude = node.int_attr("exclude_outside", 0);
    if (!cubic_a || !exclude) return tl::unexpected(!cubic_a ? cubic_a.error() : exclude.error());
    m.cubic_a = *cubic_a;
    m.exclude_outside = *exclude != 0;
    PSRUN_TRY_ASSIGN(auto antialias, node.int_attr("antialias", 0));
    PSRUN_TRY_ASSIGN(auto policy, node.string_attr("keep_aspect_ratio_policy", "stretch"));
    // Opset 18's axes: the scales or sizes name these axes only.
    Ints axes;
    PSRUN_TRY_ASSIGN(auto axes_attr, node.ints_attr("axes"));
    if (axes_attr) {
        for (auto a : *axes_attr) axes.push_back(a < 0 ? a + static_cast<std::int64_t>(rank) : a);
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
        if (policy != "stretch")
            return tl::unexpected(node.refuse("keep_aspect_ratio_policy " + policy + " is not supported (stretch is)"));
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
    // The resize kind (oneDNN's resampling) where it reads what ONNX says on every axis; a volume
    // (N x C x D x H x W) or a tensor without the batch (a parameter) always through the matrices.
    bool onednn = m.mode != "cubic" && rank <= 4 && x->dims[0].batch;
    for (std::size_t a = 2; a < rank; ++a) {
        if (out[a] < 1) return tl::unexpected(node.refuse("the output would be empty"));
        // Each axis is checked against oneDNN's coordinates or resized by an [in, out] matrix.
        if (out[a] > kMaxResizedAxis || x->dims[a].value * out[a] > kMaxResizeMatrix)
            return tl::unexpected(node.refuse("axis " + std::to_string(a) + " from " +
                                              std::to_string(x->dims[a].value) + " to " + std::to_string(out[a]) +
                                              " is larger than resizing supports (at most " +
                                              std::to_string(kMaxResizedAxis) + " out, and in x out at most 2^24)"));
        if (antialias != 0 && m.mode != "nearest" && out[a] < x->dims[a].value)
            return tl::unexpected(node.refuse("antialias 1 when downsampling is not supported"));
        if (m.transform == "tf_crop_and_resize")
            return tl::unexpected(node.refuse("coordinate_transformation_mode tf_crop_and_resize is not supported"));
        onednn = onednn && onednn_reads_same(m, x->dims[a].value, out[a], scales[a]);
    }
    if (!onednn) {
        PSRUN_TRY_ASSIGN(auto resized, emit_resize_matrices(node, input, *x, m, out, scales));
        node.bind_output(0, resized);
        return {};
    }
    PSRUN_TRY_ASSIGN(auto name,
                     node.emit({{"kind", "resize"}, {"inputs", {input}}, {"mode", m.mode}, {"sizes", sizes}}));
    node.bind_output(0, name);
    return {};
}

}  // namespace psrun::nn
