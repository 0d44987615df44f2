#include "workerd/nn/ops/window.h"

#include <algorithm>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/shape.h"
#include "workerd/nn/ops/ops.h"

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

Result<void> parse_padding(FieldReader& reader, nlohmann::json& attrs) {
    if (reader.has("padding") && reader.raw("padding").is_array()) {
        auto pads = reader.integers("padding", std::nullopt, 4, 0, kMaxTensorElements);
        if (!pads) return tl::unexpected(pads.error());
        attrs["padding"] = *pads;
        return {};
    }
    auto padding = reader.choice("padding", 0, {"valid", "same"});
    if (!padding) return tl::unexpected(padding.error());
    attrs["padding"] = *padding == 1 ? "same" : "valid";
    return {};
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

Result<nlohmann::json> import_padding(OnnxNodeImport& node) {
    auto auto_pad = node.string_attr("auto_pad", "NOTSET");
    if (!auto_pad) return tl::unexpected(auto_pad.error());
    if (*auto_pad == "SAME_UPPER") return nlohmann::json("same");
    if (*auto_pad == "VALID") return nlohmann::json("valid");
    if (*auto_pad != "NOTSET")
        return tl::unexpected(node.refuse("auto_pad " + *auto_pad + " is not supported (SAME_UPPER, VALID, NOTSET are)"));
    auto pads = node.ints_attr("pads");
    if (!pads) return tl::unexpected(pads.error());
    const std::vector<std::int64_t> p = *pads ? **pads : std::vector<std::int64_t>{0, 0, 0, 0};
    if (p.size() != 4) return tl::unexpected(node.refuse("pads must have 4 entries"));
    if (p == std::vector<std::int64_t>{0, 0, 0, 0}) return nlohmann::json("valid");
    return nlohmann::json(p);
}

}  // namespace psrun::nn
