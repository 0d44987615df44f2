// ONNX Pad -> pad, gather or slice layers (the pad layer itself is slice_pad.cpp's), opsets
// 2-18 (pads and value as attributes before 11, as inputs after; opset 18's axes input):
// - mode "constant" with a constant finite value: a pad layer;
// - modes "reflect", "edge" and "wrap" (no value): a gather per padded axis whose constant
//   indices mirror, repeat or wrap the entries, so they train through gather's backward and
//   export as Gather;
// - negative pads (cropping): a slice of what remains, then the positive pads.
#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/ops/slice_pad.h"

namespace psrun::nn {

namespace {

// The entries of an axis of length n that a "reflect", "edge" or "wrap" pad of `before` and
// `after` reads, in order (the input's own n in the middle); empty where reflect asks for more
// than n - 1 (there is nothing to mirror).
std::vector<std::int64_t> padded_entries(const std::string& mode, std::int64_t n, std::int64_t before,
                                         std::int64_t after) {
    if (mode == "reflect" && (before > n - 1 || after > n - 1)) return {};
    std::vector<std::int64_t> entries;
    for (std::int64_t i = -before; i < n + after; ++i) {
        std::int64_t j = i;
        if (mode == "reflect") j = j < 0 ? -j : j >= n ? 2 * (n - 1) - j : j;
        else if (mode == "edge") j = std::clamp<std::int64_t>(j, 0, n - 1);
        else j = ((j % n) + n) % n;
        entries.push_back(j);
    }
    return entries;
}

// A reflect, edge or wrap Pad (nn.ReflectionPad*, nn.ReplicationPad*, padding_mode "reflect"
// or "replicate"): per padded axis a gather of the entries padded_entries names, whose
// backward sums each output's gradient into the entry it copies.
Result<void> import_index_pad(OnnxNodeImport& node, const std::string& mode, std::string value,
                              const std::vector<std::int64_t>& pads) {
    const ValueInfo* in = node.info(0);
    const std::size_t rank = pads.size() / 2;
    if (in == nullptr || in->rank() != rank)
        return tl::unexpected(node.refuse("pads must hold two values per axis of the input"));
    for (std::size_t d = 0; d < rank; ++d) {
        const std::int64_t before = pads[d], after = pads[d + rank];
        if (before == 0 && after == 0) continue;
        if (in->dims[d].batch) return tl::unexpected(node.refuse("the batch axis cannot be padded"));
        const std::int64_t n = in->dims[d].value;
        if (before > 65536 || after > 65536 || n + before + after > 65536)  // gather's most indices
            return tl::unexpected(node.refuse("mode \"" + mode + "\" on axis " + std::to_string(d) +
                                              " would give more than 65536 entries"));
        auto entries = padded_entries(mode, n, before, after);
        if (entries.empty())
            return tl::unexpected(node.refuse("mode \"reflect\" on axis " + std::to_string(d) + " of length " +
                                              std::to_string(n) + " pads " + std::to_string(before) + " and " +
                                              std::to_string(after) + ": each must be below the length"));
        PSRUN_TRY_ASSIGN(auto g, node.emit({{"kind", "gather"},
                                            {"inputs", {value}},
                                            {"axis", static_cast<std::int64_t>(d)},
                                            {"indices", std::move(entries)}}));
        value = g;
    }
    node.bind_output(0, value);
    return {};
}

// Negative pads crop (F.pad(x, (-1, 0, ...)), nn.ZeroPad2d with negative sizes, a U-Net cropping
// its skip connection): a slice of what remains, emitted first; `pads` keeps only the positive
// parts for the pad after it. Returns the slice's value.
Result<std::string> import_crop(OnnxNodeImport& node, const std::string& mode, const std::string& x,
                                std::vector<std::int64_t>& pads) {
    const ValueInfo* in = node.info(0);
    if (in == nullptr || pads.size() != 2 * in->rank())
        return tl::unexpected(node.refuse("pads must hold two values per axis of a known input"));
    const std::size_t rank = in->rank();
    std::vector<std::int64_t> axes, starts, ends;
    for (std::size_t d = 0; d < rank; ++d) {
        const std::int64_t before = pads[d], after = pads[d + rank];
        if (before >= 0 && after >= 0) continue;
        const std::string axis = "axis " + std::to_string(d);
        if (in->dims[d].batch) return tl::unexpected(node.refuse("negative pads on the batch " + axis));
        if (mode != "constant" && (before > 0 || after > 0))
            return tl::unexpected(node.refuse("mode \"" + mode + "\" both crops and pads " + axis));
        // What a negative pad cuts, at most the whole axis (a pad of INT64_MIN has no negation).
        const std::int64_t n = in->dims[d].value;
        auto cut = [n](std::int64_t pad) { return pad >= 0 ? 0 : pad < -n ? n : -pad; };
        const std::int64_t cut_before = cut(before), cut_after = cut(after);
        if (cut_before + cut_after >= n)
            return tl::unexpected(node.refuse("negative pads crop " + axis + " of length " + std::to_string(n) +
                                              " by " + std::to_string(cut_before) + " and " +
                                              std::to_string(cut_after) + ": nothing would remain"));
        axes.push_back(static_cast<std::int64_t>(d));
        starts.push_back(cut_before);
        ends.push_back(n - cut_after);
        pads[d] = std::max<std::int64_t>(0, before);
        pads[d + rank] = std::max<std::int64_t>(0, after);
    }
    return node.emit({{"kind", "slice"},
                      {"inputs", {x}},
                      {"axes", axes},
                      {"starts", starts},
                      {"ends", ends},
                      {"steps", std::vector<std::int64_t>(axes.size(), 1)}});
}

}  // namespace

Result<void> import_pad(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    PSRUN_TRY_ASSIGN(auto mode, node.string_attr("mode", "constant"));
    if (mode != "constant" && mode != "reflect" && mode != "edge" && mode != "wrap")
        return tl::unexpected(node.refuse("mode \"" + mode + "\" is none of constant, reflect, edge, wrap"));
    std::vector<std::int64_t> pads;
    float value = 0.0f;
    if (node.opset() < 11) {
        PSRUN_TRY_ASSIGN(auto p, node.ints_attr("pads"));
        if (!p) return tl::unexpected(node.refuse("no pads"));
        pads = *p;
        PSRUN_TRY_ASSIGN(auto v, node.float_attr("value", 0.0f));
        value = v;
    } else {
        PSRUN_TRY_ASSIGN(auto p, node.constant_ints(1, "pads"));
        pads = p;
        if (mode == "constant" && node.input_count() > 2 && node.has_input(2)) {
            const auto v = node.floats(2);
            if (!v || v->size() != 1 || !std::isfinite((*v)[0]))
                return tl::unexpected(node.refuse("its constant value must be one finite number known at import"));
            value = (*v)[0];
        }
        if (node.input_count() > 3 && node.has_input(3)) {  // opset 18: pads for these axes only
            PSRUN_TRY_ASSIGN(auto axes, node.constant_ints(3, "axes"));
            const ValueInfo* in = node.info(0);
            if (in == nullptr || pads.size() != 2 * axes.size())
                return tl::unexpected(node.refuse("pads must hold two values per axis"));
            const auto rank = static_cast<std::int64_t>(in->rank());
            std::vector<std::int64_t> full(static_cast<std::size_t>(2 * rank), 0);
            for (std::size_t k = 0; k < axes.size(); ++k) {
                const std::int64_t a = axes[k] < 0 ? axes[k] + rank : axes[k];
                if (a < 0 || a >= rank)
                    return tl::unexpected(node.refuse("axis " + std::to_string(axes[k]) + " out of range"));
                full[static_cast<std::size_t>(a)] = pads[k];
                full[static_cast<std::size_t>(a + rank)] = pads[k + axes.size()];
            }
            pads = std::move(full);
        }
    }
    if (std::any_of(pads.begin(), pads.end(), [](std::int64_t p) { return p < 0; })) {
        PSRUN_TRY_ASSIGN(auto cropped, import_crop(node, mode, x, pads));
        x = cropped;
        if (std::all_of(pads.begin(), pads.end(), [](std::int64_t p) { return p == 0; })) {
            node.bind_output(0, x);
            return {};
        }
    }
    if (mode != "constant") return import_index_pad(node, mode, x, pads);
    nlohmann::json layer = {{"kind", "pad"}, {"inputs", {x}}, {"pads", pads}};
    if (value != 0.0f) layer["value"] = value;
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    node.bind_output(0, name);
    return {};
}

}  // namespace psrun::nn
