#include "workerd/nn/ops/window.h"

#include <algorithm>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"
#include "workerd/nn/shape.h"

namespace psrun::nn {

namespace {

struct Axis {
    std::int64_t out = 0, before = 0, after = 0;
};

// Output size for explicit pads; ceil_mode rounds up but never starts a window in the end pad.
std::int64_t out_size(std::int64_t in, std::int64_t before, std::int64_t after, std::int64_t k, std::int64_t s,
                      bool ceil_mode) {
    const std::int64_t span = in + before + after - k;
    if (span < 0) return 0;
    std::int64_t out = (ceil_mode ? (span + s - 1) / s : span / s) + 1;
    if (ceil_mode && (out - 1) * s >= in + before) --out;
    return out;
}

}  // namespace

Result<void> parse_padding(FieldReader& reader, nlohmann::json& attrs, int spatial) {
    if (reader.has("padding") && reader.raw("padding").is_array()) {
        PSRUN_TRY_ASSIGN(auto pads, reader.integers("padding", std::nullopt, static_cast<std::size_t>(2 * spatial), 0,
                                                    kMaxTensorElements));
        attrs["padding"] = pads;
        return {};
    }
    PSRUN_TRY_ASSIGN(auto padding, reader.choice("padding", 0, {"valid", "same"}));
    attrs["padding"] = padding == 1 ? "same" : "valid";
    return {};
}

bool is_1d_field(FieldReader& reader, std::string_view field) {
    return reader.has(field) && reader.raw(field).is_array() && reader.raw(field).size() == 1;
}

Result<std::int64_t> read_extent1(FieldReader& reader, std::string_view field, std::optional<std::int64_t> fallback,
                                  std::int64_t max) {
    if (reader.has(field) && reader.raw(field).is_array()) {
        PSRUN_TRY_ASSIGN(auto v, reader.integers(field, std::nullopt, 1, 1, max));
        return v.front();
    }
    return reader.integer(field, fallback, 1, max);
}

bool is_3d_field(FieldReader& reader, std::string_view field) {
    return reader.has(field) && reader.raw(field).is_array() && reader.raw(field).size() == 3;
}

Result<std::vector<std::int64_t>> read_extent3(FieldReader& reader, std::string_view field,
                                               std::optional<std::vector<std::int64_t>> fallback, std::int64_t max) {
    if (reader.has(field) && reader.raw(field).is_array()) return reader.integers(field, std::nullopt, 3, 1, max);
    if (!reader.has(field) && fallback) return *fallback;
    PSRUN_TRY_ASSIGN(auto v, reader.integer(field, std::nullopt, 1, max));
    return std::vector<std::int64_t>(3, v);
}

namespace {

std::string axes_text(const std::vector<std::int64_t>& v, const char* separator = "x") {
    std::string text;
    for (const auto x : v) text += (text.empty() ? "" : separator) + std::to_string(x);
    return text;
}

// 3-D: each axis is planned alone, so the window is the 2-D one over H x W and the 1-D rule
// over D (a 1 x kd window over 1 x D); the errors, checked here first, name the whole window.
Result<Window2d> plan_window_3d(const nlohmann::json& padding, const ValueInfo& in, const std::vector<std::int64_t>& k,
                                const std::vector<std::int64_t>& s, const std::vector<std::int64_t>& d, bool ceil_mode,
                                const char* noun) {
    const std::vector<std::int64_t> size{in.dims[2].value, in.dims[3].value, in.dims[4].value};
    std::vector<std::int64_t> reach(3);
    for (std::size_t i = 0; i < 3; ++i) reach[i] = (k[i] - 1) * d[i] + 1;
    const std::string k_text = std::string(noun) + " " + axes_text(k);
    nlohmann::json hw_pads = padding, d_pads = padding;
    if (padding.is_array()) {  // [front, top, left, back, bottom, right]
        const auto p = padding.get<std::vector<std::int64_t>>();
        for (std::size_t i = 0; i < 3; ++i)
            if (p[i] >= reach[i] || p[i + 3] >= reach[i])
                return tl::unexpected(op_error("padding [" + axes_text(p, ", ") + "] with a " + k_text + ": a pad " +
                                               "must be smaller than the " + noun));
        hw_pads = {p[1], p[2], p[4], p[5]};
        d_pads = {0, p[0], 0, p[3]};
    } else if (padding == "valid" && std::string(noun) == "kernel" &&
               (reach[0] > size[0] || reach[1] > size[1] || reach[2] > size[2])) {
        return tl::unexpected(op_error(k_text + " with padding valid on a " + axes_text(size) + " input: the " + noun +
                                       " is larger than the input, the output would be empty"));
    }
    auto hw = plan_window(hw_pads, size[1], size[2], k[1], k[2], s[1], s[2], d[1], d[2], ceil_mode, noun);
    auto depth = plan_window(d_pads, 1, size[0], 1, k[0], 1, s[0], 1, d[0], ceil_mode, noun);
    if (!hw || !depth)
        return tl::unexpected(op_error(k_text + " stride " + axes_text(s) + " on a " + axes_text(size) +
                                       " input: the output would be empty"));
    Window2d w = *hw;
    w.kd = k[0], w.sd = s[0], w.dd = d[0];
    w.pf = depth->pl, w.pk = depth->pr, w.od = depth->ow;
    return w;
}

}  // namespace

Result<Window2d> plan_window_nd(const nlohmann::json& padding, const ValueInfo& in, const std::vector<std::int64_t>& k,
                                const std::vector<std::int64_t>& s, const std::vector<std::int64_t>& d, bool ceil_mode,
                                const char* noun) {
    if (k.size() == 3) return plan_window_3d(padding, in, k, s, d, ceil_mode, noun);
    if (k.size() == 2)
        return plan_window(padding, in.dims[2].value, in.dims[3].value, k[0], k[1], s[0], s[1], d[0], d[1], ceil_mode,
                           noun);
    // 1-D: a 1 x k window over 1 x L, with messages that speak of k and L.
    const std::int64_t len = in.dims[2].value, reach = (k[0] - 1) * d[0] + 1;
    const std::string k_text = std::string(noun) + " " + std::to_string(k[0]);
    nlohmann::json pads = padding;  // [left, right] -> [0, left, 0, right]
    if (padding.is_array()) {
        const auto p = padding.get<std::vector<std::int64_t>>();
        if (p[0] >= reach || p[1] >= reach)
            return tl::unexpected(op_error("padding [" + std::to_string(p[0]) + ", " + std::to_string(p[1]) +
                                           "] with a " + k_text + ": a pad must be smaller than the " + noun));
        pads = {0, p[0], 0, p[1]};
    } else if (padding == "valid" && reach > len && std::string(noun) == "kernel") {
        return tl::unexpected(op_error(k_text + " with padding valid on an input of length " + std::to_string(len) +
                                       ": the " + noun + " is larger than the input, the output would be empty"));
    }
    auto w = plan_window(pads, 1, len, 1, k[0], 1, s[0], 1, d[0], ceil_mode, noun);
    if (!w)
        return tl::unexpected(op_error(k_text + " stride " + std::to_string(s[0]) + " on an input of length " +
                                       std::to_string(len) + ": the output would be empty"));
    return w;
}

std::vector<std::int64_t> window_out_dims(const Window2d& w, int spatial) {
    if (spatial == 1) return {w.ow};
    if (spatial == 3) return {w.od, w.oh, w.ow};
    return {w.oh, w.ow};
}

std::vector<std::int64_t> window_onnx_pads(const Window2d& w, int spatial) {
    if (spatial == 1) return {w.pl, w.pr};
    if (spatial == 3) return {w.pf, w.pt, w.pl, w.pk, w.pb, w.pr};
    return {w.pt, w.pl, w.pb, w.pr};
}

namespace {

std::vector<std::int64_t> per_axis(int spatial, std::int64_t d, std::int64_t h, std::int64_t w) {
    if (spatial == 1) return {w};
    if (spatial == 3) return {d, h, w};
    return {h, w};
}

}  // namespace

std::vector<std::int64_t> window_kernel(const Window2d& w, int spatial) { return per_axis(spatial, w.kd, w.kh, w.kw); }
std::vector<std::int64_t> window_strides(const Window2d& w, int spatial) { return per_axis(spatial, w.sd, w.sh, w.sw); }
std::vector<std::int64_t> window_dilations(const Window2d& w, int spatial) {
    return per_axis(spatial, w.dd, w.dh, w.dw);
}

Result<Window2d> plan_window(const nlohmann::json& padding, std::int64_t ih, std::int64_t iw, std::int64_t kh,
                             std::int64_t kw, std::int64_t sh, std::int64_t sw, std::int64_t dh, std::int64_t dw,
                             bool ceil_mode, const char* noun) {
    Window2d w{kh, kw, sh, sw, dh, dw};
    const std::int64_t ekh = (kh - 1) * dh + 1, ekw = (kw - 1) * dw + 1;
    const std::string k_text = extent_text(kh, kw);
    if (padding.is_string() && padding.get<std::string>() == "same") {
        const AxisPlan rows = plan_axis(ih, ekh, sh, Padding::kSame);
        const AxisPlan cols = plan_axis(iw, ekw, sw, Padding::kSame);
        w.pt = rows.pad_before, w.pb = rows.pad_after, w.pl = cols.pad_before, w.pr = cols.pad_after;
    } else if (padding.is_array()) {
        const auto p = padding.get<std::vector<std::int64_t>>();
        w.pt = p[0], w.pl = p[1], w.pb = p[2], w.pr = p[3];
        if (w.pt >= ekh || w.pb >= ekh || w.pl >= ekw || w.pr >= ekw)
            return tl::unexpected(op_error("padding [" + std::to_string(w.pt) + ", " + std::to_string(w.pl) + ", " +
                                           std::to_string(w.pb) + ", " + std::to_string(w.pr) + "] with a " + k_text +
                                           " " + noun + ": a pad must be smaller than the " + noun));
    } else if ((ekh > ih || ekw > iw) && std::string(noun) == "kernel") {
        return tl::unexpected(op_error(std::string(noun) + " " + k_text + " with padding valid on a " +
                                       extent_text(ih, iw) + " input: the " + noun +
                                       " is larger than the input, the output would be empty"));
    }
    w.oh = out_size(ih, w.pt, w.pb, ekh, sh, ceil_mode);
    w.ow = out_size(iw, w.pl, w.pr, ekw, sw, ceil_mode);
    if (w.oh < 1 || w.ow < 1)
        return tl::unexpected(op_error(std::string(noun) + " " + k_text + " stride " +
                                       (sh == sw ? std::to_string(sh) : extent_text(sh, sw)) + " on a " +
                                       extent_text(ih, iw) + " input: the output would be empty"));
    if (ceil_mode) {  // the end pads the last window reaches
        w.pb = std::max(w.pb, (w.oh - 1) * sh + ekh - ih - w.pt);
        w.pr = std::max(w.pr, (w.ow - 1) * sw + ekw - iw - w.pl);
    }
    return w;
}

bool pads_are_same(const Window2d& w, std::int64_t ih, std::int64_t iw) {
    const AxisPlan rows = plan_axis(ih, (w.kh - 1) * w.dh + 1, w.sh, Padding::kSame);
    const AxisPlan cols = plan_axis(iw, (w.kw - 1) * w.dw + 1, w.sw, Padding::kSame);
    return w.pt == rows.pad_before && w.pb == rows.pad_after && w.pl == cols.pad_before && w.pr == cols.pad_after;
}

Result<std::vector<std::int64_t>> spatial_attr(OnnxNodeImport& node, const char* name, std::size_t spatial,
                                               std::int64_t fallback) {
    PSRUN_TRY_ASSIGN(auto v, node.ints_attr(name));
    if (!v) return std::vector<std::int64_t>(spatial, fallback);
    if (v->size() != spatial)
        return tl::unexpected(node.refuse(std::string(name) + " has " + std::to_string(v->size()) + " entries; the " +
                                          "weights or input give " + std::to_string(spatial)));
    return *v;
}

Result<nlohmann::json> import_padding(OnnxNodeImport& node, int spatial) {
    PSRUN_TRY_ASSIGN(auto auto_pad, node.string_attr("auto_pad", "NOTSET"));
    if (auto_pad == "SAME_UPPER") return nlohmann::json("same");
    if (auto_pad == "VALID") return nlohmann::json("valid");
    if (auto_pad != "NOTSET")
        return tl::unexpected(
            node.refuse("auto_pad " + auto_pad + " is not supported (SAME_UPPER, VALID, NOTSET are)"));
    PSRUN_TRY_ASSIGN(auto pads, node.ints_attr("pads"));
    const auto count = static_cast<std::size_t>(2 * spatial);
    const std::vector<std::int64_t> p = pads ? *pads : std::vector<std::int64_t>(count, 0);
    if (p.size() != count) return tl::unexpected(node.refuse("pads must have " + std::to_string(count) + " entries"));
    if (p == std::vector<std::int64_t>(count, 0)) return nlohmann::json("valid");
    return nlohmann::json(p);
}

}  // namespace psrun::nn
