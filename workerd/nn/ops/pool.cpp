// max_pool, avg_pool: {"kind": "max_pool", "window": k | [kh, kw], "stride": window (default)
//                      | s | [sh, sw], "padding": "valid" (default) | "same" | [t, l, b, r],
//                      "ceil_mode": false, "count_include_pad": false (avg_pool),
//                      "dilation": 1 | [dh, dw] (max_pool: window taps d apart, MaxPool2d(dilation=d))}
// global_avg_pool, global_max_pool: {"kind": "global_avg_pool"}: the window is the whole image.
// Per channel; output N x C x OH x OW (window.h). 1-D (MaxPool1d, AvgPool1d): "window": [k] (then
// "stride": s | [s], "padding": "valid" | "same" | [left, right]) over N x C x L; the global
// pools take N x C x L too (output N x C x 1). Padded positions take no part (max ignores
// them, avg divides by the count of real inputs, as TF) unless count_include_pad (PyTorch's
// AvgPool2d default: zeros counted). No tensors. ONNX: MaxPool, AveragePool, GlobalAveragePool,
// GlobalMaxPool.
// 3-D (MaxPool3d, AvgPool3d): "window": [kd, kh, kw] (then "stride": s | [sd, sh, sw],
// "padding": "valid" | "same" | [front, top, left, back, bottom, right]) over N x C x D x H x W;
// the global pools take N x C x D x H x W too (output N x C x 1 x 1 x 1).
#include "workerd/nn/ops/pool.h"

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_pool(FieldReader& reader, nlohmann::json& attrs, bool avg) {
    PSRUN_TRY_ASSIGN(auto ceil_mode, reader.boolean("ceil_mode", false));
    std::vector<std::int64_t> dilation;
    if (is_1d_field(reader, "window")) {  // 1-D: every window field has one entry
        PSRUN_TRY_ASSIGN(auto window, read_extent1(reader, "window", std::nullopt, kMaxTensorElements));
        PSRUN_TRY_ASSIGN(auto stride, read_extent1(reader, "stride", window, kMaxTensorElements));
        attrs["window"] = {window};
        attrs["stride"] = {stride};
        if (!avg) {
            PSRUN_TRY_ASSIGN(auto d, read_extent1(reader, "dilation", 1, kMaxTensorElements));
            dilation = {d};
        }
        if (auto ok = parse_padding(reader, attrs, 1); !ok) return ok;
    } else if (is_3d_field(reader, "window")) {  // 3-D: [kd, kh, kw]
        PSRUN_TRY_ASSIGN(auto window, read_extent3(reader, "window", std::nullopt, kMaxTensorElements));
        PSRUN_TRY_ASSIGN(auto stride, read_extent3(reader, "stride", window, kMaxTensorElements));
        attrs["window"] = window;
        attrs["stride"] = stride;
        if (!avg) {
            PSRUN_TRY_ASSIGN(auto d,
                             read_extent3(reader, "dilation", std::vector<std::int64_t>(3, 1), kMaxTensorElements));
            dilation = d;
        }
        if (auto ok = parse_padding(reader, attrs, 3); !ok) return ok;
    } else {
        PSRUN_TRY_ASSIGN(auto window, reader.extent("window", std::nullopt, kMaxTensorElements));
        PSRUN_TRY_ASSIGN(auto stride, reader.extent("stride", window, kMaxTensorElements));
        attrs["window"] = {window.h, window.w};
        attrs["stride"] = {stride.h, stride.w};
        if (!avg) {
            PSRUN_TRY_ASSIGN(auto d, reader.extent("dilation", Extent2{1, 1}, kMaxTensorElements));
            dilation = {d.h, d.w};
        }
        if (auto ok = parse_padding(reader, attrs); !ok) return ok;
    }
    // max_pool's dilation (MaxPool2d(dilation=2)): added later, written only when not 1s.
    if (!dilation.empty() && dilation != std::vector<std::int64_t>(dilation.size(), 1)) attrs["dilation"] = dilation;
    // Added after format 1: written only when set, so older descriptions keep their hash.
    if (ceil_mode) attrs["ceil_mode"] = true;
    if (avg) {
        PSRUN_TRY_ASSIGN(auto include, reader.boolean("count_include_pad", false));
        if (include) attrs["count_include_pad"] = true;
    }
    return {};
}

Result<void> parse_max(FieldReader& reader, nlohmann::json& attrs) { return parse_pool(reader, attrs, false); }
Result<void> parse_avg(FieldReader& reader, nlohmann::json& attrs) { return parse_pool(reader, attrs, true); }
Result<void> infer_pool(InferContext& context) {
    const ValueInfo& in = context.input(0);
    PSRUN_TRY_ASSIGN(auto g, pool_geometry(context.node(), in));
    const Window2d& w = g.window;
    const Dim c = in.dims[1];
    Dims out{in.dims[0], c};
    for (const auto d : window_out_dims(w, g.spatial)) out.push_back(Dim::of(d));
    context.set_output(0, ValueInfo{out});
    context.add_flops(static_cast<double>(c.value * w.od * w.oh * w.ow * w.kd * w.kh * w.kw));
    return {};
}

Result<void> import_pool(OnnxNodeImport& node) {
    const ValueInfo* x = node.info(0);
    if (x == nullptr || x->rank() < 3 || x->rank() > 5)
        return tl::unexpected(node.refuse("the input must be N x C x H x W, N x C x L or N x C x D x H x W"));
    const std::size_t spatial = x->rank() - 2;
    PSRUN_TRY_ASSIGN(auto input, node.value(0));
    const auto op = node.op_type();
    if (op == "GlobalAveragePool" || op == "GlobalMaxPool") {
        PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", op == "GlobalMaxPool" ? "global_max_pool" : "global_avg_pool"},
                                               {"inputs", {input}}}));
        node.bind_output(0, name);
        return {};
    }
    if (node.output_count() > 1) return tl::unexpected(node.refuse("the Indices output is not supported"));
    if (!node.has_attr("kernel_shape")) return tl::unexpected(node.refuse("kernel_shape is required"));
    PSRUN_TRY_ASSIGN(auto kernel, spatial_attr(node, "kernel_shape", spatial, 1));
    PSRUN_TRY_ASSIGN(auto strides, spatial_attr(node, "strides", spatial, 1));
    PSRUN_TRY_ASSIGN(auto dilations, spatial_attr(node, "dilations", spatial, 1));
    const bool dilated = dilations != std::vector<std::int64_t>(spatial, 1);
    if (dilated && op == "AveragePool")
        return tl::unexpected(node.refuse("dilations other than 1 (an average pool's, opset 19's) are not supported"));
    PSRUN_TRY_ASSIGN(auto ceil, node.int_attr("ceil_mode", 0));
    PSRUN_TRY_ASSIGN(auto storage, node.int_attr("storage_order", 0));
    if (storage != 0) return tl::unexpected(node.refuse("storage_order 1 (column major) is not supported"));
    const bool avg = op == "AveragePool";
    nlohmann::json layer = {
        {"kind", avg ? "avg_pool" : "max_pool"}, {"inputs", {input}}, {"window", kernel}, {"stride", strides}};
    PSRUN_TRY_ASSIGN(auto padding, import_padding(node, static_cast<int>(spatial)));
    layer["padding"] = padding;
    if (dilated) layer["dilation"] = dilations;
    if (ceil) layer["ceil_mode"] = true;
    if (avg) {
        PSRUN_TRY_ASSIGN(auto include, node.int_attr("count_include_pad", 0));
        if (include) layer["count_include_pad"] = true;
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    node.bind_output(0, name);
    return {};
}

Result<void> export_pool(OnnxNodeExport& out) {
    const Node& node = out.node();
    if (node.op == "global_avg_pool" || node.op == "global_max_pool") {
        out.add(node.op == "global_avg_pool" ? "GlobalAveragePool" : "GlobalMaxPool", {out.input(0)}, {out.output(0)},
                {}, node.name);
        return {};
    }
    const ValueInfo& in = out.model().value(node.inputs[0]);
    const auto k = node.attrs.at("window").get<std::vector<std::int64_t>>();
    const auto s = node.attrs.at("stride").get<std::vector<std::int64_t>>();
    const auto d = node.attrs.value("dilation", std::vector<std::int64_t>(k.size(), 1));
    // The pads as given (ceil_mode's end pads are ONNX's to add).
    PSRUN_TRY_ASSIGN(auto w, plan_window_nd(node.attrs.at("padding"), in, k, s, d, false, "window"));
    const bool max = node.op == "max_pool";
    std::vector<std::pair<std::string, OnnxAttr>> attrs{
        {"kernel_shape", k},
        {"strides", s},
        {"pads", window_onnx_pads(w, static_cast<int>(k.size()))},
        {"ceil_mode", std::int64_t{node.attrs.value("ceil_mode", false) ? 1 : 0}}};
    if (node.attrs.contains("dilation")) attrs.emplace_back("dilations", d);
    if (!max)
        attrs.emplace_back("count_include_pad", std::int64_t{node.attrs.value("count_include_pad", false) ? 1 : 0});
    out.add(max ? "MaxPool" : "AveragePool", {out.input(0)}, {out.output(0)}, attrs, node.name);
    return {};
}

}  // namespace

Result<PoolGeometry> pool_geometry(const Node& node, const ValueInfo& in) {
    PoolGeometry g;
    g.max = node.op == "max_pool" || node.op == "global_max_pool";
    g.global = node.op == "global_avg_pool" || node.op == "global_max_pool";
    std::vector<std::int64_t> k, s;
    if (!g.global) {
        k = node.attrs.at("window").get<std::vector<std::int64_t>>();
        s = node.attrs.at("stride").get<std::vector<std::int64_t>>();
    }
    // Global pools take any rank 3 to 5; a windowed one the rank its window has.
    const std::size_t rank = g.global ? (in.rank() == 3 || in.rank() == 5 ? in.rank() : 4) : k.size() + 2;
    bool ok = in.type == ElementType::kFloat && in.rank() == rank;
    for (std::size_t i = 1; ok && i < in.rank(); ++i) ok = !in.dims[i].batch;
    if (!ok && rank == 3 && !g.global)
        return tl::unexpected(op_error("a 1-D window [" + std::to_string(k[0]) + "] expects an N x C x L input, got " +
                                       to_string(in.dims)));
    if (!ok && rank == 5 && !g.global)
        return tl::unexpected(op_error("a 3-D window [" + std::to_string(k[0]) + ", " + std::to_string(k[1]) + ", " +
                                       std::to_string(k[2]) + "] expects an N x C x D x H x W input, got " +
                                       to_string(in.dims)));
    if (!ok)
        return tl::unexpected(
            op_error("expects an image N x C x H x W input, got " + to_string(in.dims) +
                     (in.rank() == 2 ? " flat features (a dense layer came before)" : "") +
                     (in.rank() == 3 ? " (over N x C x L give a 1-D window: \"window\": [k])" : "") +
                     (in.rank() == 5 ? " (over N x C x D x H x W give a 3-D window: \"window\": [kd, kh, kw])" : "")));
    g.spatial = static_cast<int>(rank) - 2;
    const std::int64_t ih = g.spatial == 1 ? 1 : in.dims[rank - 2].value, iw = in.dims[rank - 1].value;
    if (g.global) {
        g.window = Window2d{ih, iw, ih, iw, 1, 1, 0, 0, 0, 0, 1, 1};
        if (g.spatial == 3) g.window.kd = g.window.sd = in.dims[2].value;  // od stays 1
        return g;
    }
    g.count_include_pad = node.attrs.value("count_include_pad", false);
    const auto d = node.attrs.value("dilation", std::vector<std::int64_t>(k.size(), 1));
    PSRUN_TRY_ASSIGN(
        auto w, plan_window_nd(node.attrs.at("padding"), in, k, s, d, node.attrs.value("ceil_mode", false), "window"));
    g.window = w;
    return g;
}

const OpSchema& max_pool_schema() {
    static const OpSchema schema{"max_pool", 1, 1, parse_max, infer_pool, {"MaxPool"}, import_pool, export_pool};
    return schema;
}

const OpSchema& avg_pool_schema() {
    static const OpSchema schema{"avg_pool", 1, 1, parse_avg, infer_pool, {"AveragePool"}, import_pool, export_pool};
    return schema;
}

const OpSchema& global_avg_pool_schema() {
    static const OpSchema schema{"global_avg_pool",     1,           1,          parse_no_attributes, infer_pool,
                                 {"GlobalAveragePool"}, import_pool, export_pool};
    return schema;
}

const OpSchema& global_max_pool_schema() {
    static const OpSchema schema{"global_max_pool", 1,           1,          parse_no_attributes, infer_pool,
                                 {"GlobalMaxPool"}, import_pool, export_pool};
    return schema;
}

}  // namespace psrun::nn
