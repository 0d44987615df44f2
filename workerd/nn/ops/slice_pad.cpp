// Cutting a strided block out of a value, and padding one with a constant:
//   {"kind": "slice", "axes": [a...], "starts": [s...], "ends": [e...], "steps": [1...]}: along
//     each axis a, the entries s, s + step, ... before e (numpy's x[s:e:step]; negative s and e
//     count from the end, both clamped to the dim as ONNX does). Steps default to 1 and must be
//     positive; the batch axis cannot be sliced; the result cannot be empty. (An ONNX Slice with
//     a negative step, x.flip(1), imports as a slice of its other axes and a gather of the
//     reversed axis's entries in their order.)
//   {"kind": "pad", "pads": [b0, b1, ..., e0, e1, ...], "value": 0}: b_i entries of `value` (a
//     finite number, 0 by default: F.pad(x, p, value=v)) before and e_i after along dim i
//     (ONNX's order, one begin and one end per dim, the batch dim's 0).
// slice: floats or integers (ids[:, :-1], a language model's shifted tokens); pad: floats. No
// tensors; FLOPs 0 (data movement).
// ONNX: Slice with constant starts, ends, axes and steps, negative steps included (a Slice of
// constants, as in shape arithmetic, is evaluated at import by onnx_consts.cpp). Pad's import,
// every mode and negative pads included, is pad_import.cpp's.
#include <algorithm>
#include <cmath>
#include <limits>
#include <span>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/ops.h"
#include "workerd/nn/ops/slice_pad.h"

namespace psrun::nn {

namespace {

constexpr std::int64_t kBig = std::numeric_limits<std::int64_t>::max();

Result<void> parse_slice(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axes, reader.integers("axes", std::nullopt, 0, -6, 5));
    PSRUN_TRY_ASSIGN(auto starts, reader.integers("starts", std::nullopt, axes.size(), -kBig, kBig));
    PSRUN_TRY_ASSIGN(auto ends, reader.integers("ends", std::nullopt, axes.size(), -kBig, kBig));
    PSRUN_TRY_ASSIGN(auto steps,
                     reader.integers("steps", std::vector<std::int64_t>(axes.size(), 1), axes.size(), 1, kBig));
    attrs["axes"] = axes;
    attrs["starts"] = starts;
    attrs["ends"] = ends;
    attrs["steps"] = steps;
    return {};
}

Result<void> parse_pad(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto pads, reader.integers("pads", std::nullopt, 0, 0, std::int64_t{1} << 20));
    attrs["pads"] = pads;
    PSRUN_TRY_ASSIGN(auto value, reader.number("value", 0.0));
    if (!std::isfinite(value) || std::abs(value) > std::numeric_limits<float>::max())
        return tl::unexpected(op_error("value must be a finite float"));
    if (value != 0.0) attrs["value"] = value;  // added after format 1: only when set
    return {};
}

Result<void> infer_slice(InferContext& context) {
    const ValueInfo& in = context.input(0);
    PSRUN_TRY_ASSIGN(auto w, slice_window(in.dims, context.attrs()));
    context.set_output(0, ValueInfo{w.count, in.type});  // ids[:, :-1] stays integer
    context.add_flops(0);
    return {};
}

Result<void> infer_pad(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    const auto pads = context.attr_ints("pads");
    if (pads.size() != 2 * in.rank())
        return tl::unexpected(op_error(std::to_string(pads.size()) + " pads for " + to_string(in.dims) + "; give " +
                                       std::to_string(2 * in.rank()) + " (a begin per dim, then an end per dim)"));
    Dims out = in.dims;
    for (std::size_t d = 0; d < in.rank(); ++d) {
        const std::int64_t extra = pads[d] + pads[d + in.rank()];
        if (extra == 0) continue;
        if (in.dims[d].batch)
            return tl::unexpected(op_error("dim " + std::to_string(d) + " is the batch; its pads must be 0"));
        out[d].value += extra;
    }
    context.set_output(0, ValueInfo{out, ElementType::kFloat});
    context.add_flops(0);
    return {};
}

Result<void> import_slice(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const ValueInfo* in = node.info(0);
    if (in == nullptr) return tl::unexpected(node.refuse("the input's rank is unknown"));
    if (node.opset() < 10) return tl::unexpected(node.refuse("Slice before opset 10 (attributes) is not supported"));
    PSRUN_TRY_ASSIGN(auto starts, node.constant_ints(1, "starts"));
    PSRUN_TRY_ASSIGN(auto ends, node.constant_ints(2, "ends"));
    std::vector<std::int64_t> axes(starts.size()), steps(starts.size(), 1);
    for (std::size_t k = 0; k < axes.size(); ++k) axes[k] = static_cast<std::int64_t>(k);
    if (node.input_count() > 3 && node.has_input(3)) {
        PSRUN_TRY_ASSIGN(auto a, node.constant_ints(3, "axes"));
        axes = a;
    }
    if (node.input_count() > 4 && node.has_input(4)) {
        PSRUN_TRY_ASSIGN(auto s, node.constant_ints(4, "steps"));
        steps = s;
    }
    if (axes.size() != starts.size() || ends.size() != starts.size() || steps.size() != starts.size())
        return tl::unexpected(node.refuse("starts, ends, axes and steps differ in length"));
    // The whole of a batch axis (start 0, end past any batch, step 1: torch's index_add and
    // x[:, ...] write one) is that axis unchanged: it leaves the slice. Any other cut of the
    // batch axis is refused below.
    for (std::size_t k = 0; k < axes.size();) {
        const auto rank = static_cast<std::int64_t>(in->rank());
        const std::int64_t d = axes[k] < 0 ? axes[k] + rank : axes[k];
        const bool whole = starts[k] == 0 && steps[k] == 1 && ends[k] >= std::numeric_limits<std::int32_t>::max();
        if (d < 0 || d >= rank || !in->dims[static_cast<std::size_t>(d)].batch || !whole) {
            ++k;
            continue;
        }
        for (auto* v : {&axes, &starts, &ends, &steps}) v->erase(v->begin() + static_cast<std::ptrdiff_t>(k));
    }
    if (axes.empty()) {
        node.bind_output(0, x);
        return {};
    }
    // A negative step (x.flip(d)): that axis leaves the slice and becomes a gather of its
    // entries in order, starting at start clamped to [0, len - 1] and stopping before end clamped
    // to [-1, len - 1] (ONNX's rule for negative steps).
    std::vector<std::pair<std::int64_t, std::vector<std::int64_t>>> reversed;
    for (std::size_t k = 0; k < steps.size();) {
        if (steps[k] == 0) return tl::unexpected(node.refuse("step 0 on axis " + std::to_string(axes[k])));
        if (steps[k] > 0) {
            ++k;
            continue;
        }
        const auto rank = static_cast<std::int64_t>(in->rank());
        const std::int64_t d = axes[k] < 0 ? axes[k] + rank : axes[k];
        if (d < 0 || d >= rank)
            return tl::unexpected(node.refuse("axis " + std::to_string(axes[k]) + " is out of range"));
        if (in->dims[static_cast<std::size_t>(d)].batch)
            return tl::unexpected(
                node.refuse("axis " + std::to_string(axes[k]) + " is the batch dim; slice a dim of each example"));
        const std::int64_t len = in->dims[static_cast<std::size_t>(d)].value;
        auto at = [len](std::int64_t v, std::int64_t low) {
            if (v < 0) v = v < -len ? -len - 1 : v + len;
            return std::clamp<std::int64_t>(v, low, len - 1);
        };
        const std::int64_t from = at(starts[k], 0), to = at(ends[k], -1);
        std::vector<std::int64_t> picked;
        for (std::int64_t i = from; i > to; i += steps[k]) {
            picked.push_back(i);
        }
        if (picked.empty())
            return tl::unexpected(node.refuse("axis " + std::to_string(axes[k]) + " from " + std::to_string(starts[k]) +
                                              " to " + std::to_string(ends[k]) + " by " + std::to_string(steps[k]) +
                                              " is empty"));
        reversed.emplace_back(d, std::move(picked));
        axes.erase(axes.begin() + static_cast<std::ptrdiff_t>(k));
        starts.erase(starts.begin() + static_cast<std::ptrdiff_t>(k));
        ends.erase(ends.begin() + static_cast<std::ptrdiff_t>(k));
        steps.erase(steps.begin() + static_cast<std::ptrdiff_t>(k));
    }
    if (!reversed.empty()) {
        std::string value = x;
        if (!axes.empty()) {
            nlohmann::json attrs = {{"axes", axes}, {"starts", starts}, {"ends", ends}, {"steps", steps}};
            auto w = slice_window(in->dims, attrs);
            if (!w) return tl::unexpected(node.refuse(w.error().message));
            PSRUN_TRY_ASSIGN(auto cut, node.emit({{"kind", "slice"},
                                                  {"inputs", {value}},
                                                  {"axes", axes},
                                                  {"starts", starts},
                                                  {"ends", ends},
                                                  {"steps", steps}}));
            value = cut;
        }
        for (const auto& [d, picked] : reversed) {
            PSRUN_TRY_ASSIGN(auto g,
                             node.emit({{"kind", "gather"}, {"inputs", {value}}, {"axis", d}, {"indices", picked}}));
            value = g;
        }
        node.bind_output(0, value);
        return {};
    }
    // Clamped to the dims here, so that x[:, 1:] (ends INT64_MAX) and x[:, 1:5] are one description.
    nlohmann::json attrs = {{"axes", axes}, {"starts", starts}, {"ends", ends}, {"steps", steps}};
    auto w = slice_window(in->dims, attrs);
    if (!w) return tl::unexpected(node.refuse(w.error().message));
    for (std::size_t k = 0; k < axes.size(); ++k) {
        const auto d =
            static_cast<std::size_t>(axes[k] < 0 ? axes[k] + static_cast<std::int64_t>(in->rank()) : axes[k]);
        starts[k] = w->start[d];
        ends[k] = std::min(in->dims[d].value, w->start[d] + (w->count[d].value - 1) * w->step[d] + 1);
        axes[k] = static_cast<std::int64_t>(d);
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "slice"},
                                           {"inputs", {x}},
                                           {"axes", axes},
                                           {"starts", starts},
                                           {"ends", ends},
                                           {"steps", steps}}));
    node.bind_output(0, name);
    return {};
}

Result<void> export_slice(OnnxNodeExport& out) {
    const Node& node = out.node();
    auto ints = [&](const char* key) { return node.attrs.at(key).get<std::vector<std::int64_t>>(); };
    out.add(
        "Slice",
        {out.input(0), out.int64_constant(node.name + "/starts", ints("starts")),
         out.int64_constant(node.name + "/ends", ints("ends")), out.int64_constant(node.name + "/axes", ints("axes")),
         out.int64_constant(node.name + "/steps", ints("steps"))},
        {out.output(0)}, {}, node.name);
    return {};
}

Result<void> export_pad(OnnxNodeExport& out) {
    const Node& node = out.node();
    std::vector<std::string> inputs = {
        out.input(0), out.int64_constant(node.name + "/pads", node.attrs.at("pads").get<std::vector<std::int64_t>>())};
    if (node.attrs.contains("value")) {
        const float value = node.attrs.at("value").get<float>();
        inputs.push_back(node.name + "/value");
        out.constant_node(inputs.back(), {}, std::span<const float>(&value, 1), "");
    }
    out.add("Pad", inputs, {out.output(0)}, {{"mode", std::string("constant")}}, node.name);
    return {};
}

}  // namespace

Result<SliceWindow> slice_window(const Dims& dims, const nlohmann::json& attrs) {
    const auto axes = attrs.at("axes").get<std::vector<std::int64_t>>();
    const auto starts = attrs.at("starts").get<std::vector<std::int64_t>>();
    const auto ends = attrs.at("ends").get<std::vector<std::int64_t>>();
    const auto steps = attrs.at("steps").get<std::vector<std::int64_t>>();
    SliceWindow w{std::vector<std::int64_t>(dims.size(), 0), std::vector<std::int64_t>(dims.size(), 1), dims};
    std::vector<bool> seen(dims.size(), false);
    for (std::size_t k = 0; k < axes.size(); ++k) {
        PSRUN_TRY_ASSIGN(auto axis, normal_axis(axes[k], dims.size()));
        const auto d = static_cast<std::size_t>(axis);
        if (seen[d]) return tl::unexpected(op_error("axis " + std::to_string(axes[k]) + " is given twice"));
        seen[d] = true;
        if (dims[d].batch)
            return tl::unexpected(
                op_error("axis " + std::to_string(axes[k]) + " is the batch dim; slice a dim of each example"));
        if (steps[k] < 1)
            return tl::unexpected(op_error("step " + std::to_string(steps[k]) + " on axis " + std::to_string(axes[k]) +
                                           "; steps must be 1 or more"));
        const std::int64_t len = dims[d].value;
        auto clamp = [len](std::int64_t v) {
            return std::clamp<std::int64_t>(v < 0 ? (v < -len ? 0 : v + len) : v, 0, len);
        };
        const std::int64_t s = clamp(starts[k]), e = clamp(ends[k]);
        const std::int64_t count = e > s ? (e - s - 1) / steps[k] + 1 : 0;  // no overflow for huge steps
        if (count == 0)
            return tl::unexpected(op_error("axis " + std::to_string(axes[k]) + " of " + to_string(dims) + " from " +
                                           std::to_string(starts[k]) + " to " + std::to_string(ends[k]) + " is empty"));
        w.start[d] = s;
        w.step[d] = steps[k];
        w.count[d] = Dim::of(count);
    }
    return w;
}

SliceWindow pad_window(const Dims& in_dims, const std::vector<std::int64_t>& pads) {
    SliceWindow w{std::vector<std::int64_t>(in_dims.size(), 0), std::vector<std::int64_t>(in_dims.size(), 1), in_dims};
    for (std::size_t d = 0; d < in_dims.size(); ++d) w.start[d] = pads[d];
    return w;
}

const OpSchema& slice_schema() {
    static const OpSchema s{"slice", 1, 1, parse_slice, infer_slice, {"Slice"}, import_slice, export_slice};
    return s;
}

const OpSchema& pad_schema() {
    static const OpSchema s{"pad", 1, 1, parse_pad, infer_pad, {"Pad"}, import_pad, export_pad};
    return s;
}

}  // namespace psrun::nn
