// Joining and cutting values along one axis:
//   {"kind": "concat", "inputs": ["a", "b", ...], "axis": A}: the inputs side by side along A
//     (every other dim equal);
//   {"kind": "split", "axis": A, "sizes": [s0, s1, ...]}: outputs "<name>", "<name>:1", ... of
//     s_i entries along A each (the sizes add up to the input's dim).
// `axis` in [-rank, rank), required, never the batch dim. Floats; concat also joins integers
// (all inputs one type: torch's index columns for ScatterND/GatherND). No tensors; FLOPs 0
// (data movement).
// ONNX: Concat (a Concat of constants, such as shape arithmetic, is evaluated at import by
// onnx_consts.cpp and never reaches this), Split (opset 13 sizes as the second input, opsets
// 11 and 12 the "split" attribute, absent: equal parts, one per output).
#include <numeric>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_concat(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axis, reader.integer("axis", std::nullopt, -6, 5));
    attrs["axis"] = axis;
    return {};
}

Result<void> parse_split(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axis, reader.integer("axis", std::nullopt, -6, 5));
    PSRUN_TRY_ASSIGN(auto sizes, reader.integers("sizes", std::nullopt, 0, 1, std::int64_t{1} << 40));
    attrs["axis"] = axis;
    attrs["sizes"] = sizes;
    return {};
}

// The axis of `in` the node's "axis" names, or an error (out of range, the batch dim).
Result<std::size_t> data_axis(const InferContext& context, const ValueInfo& in) {
    const auto given = context.attr_int("axis");
    PSRUN_TRY_ASSIGN(auto axis, normal_axis(given, in.rank()));
    if (in.dims[static_cast<std::size_t>(axis)].batch)
        return tl::unexpected(op_error("axis " + std::to_string(given) + " of " + to_string(in.dims) +
                                       " is the batch dim; join or cut along a dim of each example"));
    return static_cast<std::size_t>(axis);
}

Result<void> infer_concat(InferContext& context) {
    const ValueInfo& first = context.input(0);
    PSRUN_TRY_ASSIGN(auto axis, data_axis(context, first));
    Dims out = first.dims;
    out[axis].value = 0;
    for (std::size_t i = 0; i < context.input_count(); ++i) {
        const ValueInfo& v = context.input(i);
        if (v.type != first.type)
            return tl::unexpected(op_error("joins floats and integers; input " + std::to_string(i) + " (" +
                                           context.input_name(i) + ") holds " +
                                           (v.type == ElementType::kInt ? "integers" : "floats") + ", input 0 " +
                                           (first.type == ElementType::kInt ? "integers" : "floats")));
        bool same = v.rank() == first.rank();
        for (std::size_t d = 0; same && d < v.rank(); ++d) same = d == axis || v.dims[d] == first.dims[d];
        if (!same)
            return tl::unexpected(op_error("input " + std::to_string(i) + " (" + context.input_name(i) + ") is " +
                                           to_string(v.dims) + " where input 0 is " + to_string(first.dims) +
                                           "; every dim but axis " + std::to_string(axis) + " must match"));
        out[axis].value += v.dims[axis].value;
    }
    context.set_output(0, ValueInfo{out, first.type});
    context.add_flops(0);
    return {};
}

Result<void> infer_split(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kFloat) return tl::unexpected(op_error("expects floats, got integer ids"));
    PSRUN_TRY_ASSIGN(auto axis, data_axis(context, in));
    const auto sizes = context.attr_ints("sizes");
    const auto total = std::accumulate(sizes.begin(), sizes.end(), std::int64_t{0});
    if (total != in.dims[axis].value)
        return tl::unexpected(op_error("sizes " + describe_value(nlohmann::json(sizes)) + " add up to " +
                                       std::to_string(total) + "; dim " + std::to_string(axis) + " of " +
                                       to_string(in.dims) + " is " + std::to_string(in.dims[axis].value)));
    for (std::size_t i = 0; i < sizes.size(); ++i) {
        Dims d = in.dims;
        d[axis].value = sizes[i];
        context.set_output(i, ValueInfo{d, ElementType::kFloat});
    }
    context.add_flops(0);
    return {};
}

Result<void> import_concat(OnnxNodeImport& node) {
    nlohmann::json inputs = nlohmann::json::array();
    for (std::size_t i = 0; i < node.input_count(); ++i) {
        PSRUN_TRY_ASSIGN(auto v, node.value(i));
        inputs.push_back(v);
    }
    PSRUN_TRY_ASSIGN(auto axis, node.int_attr("axis", 0));
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "concat"}, {"inputs", inputs}, {"axis", axis}}));
    node.bind_output(0, name);
    return {};
}

Result<void> import_split(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    PSRUN_TRY_ASSIGN(auto axis, node.int_attr("axis", 0));
    std::vector<std::int64_t> sizes;
    if (node.input_count() > 1 && node.has_input(1)) {
        PSRUN_TRY_ASSIGN(auto given, node.constant_ints(1, "split sizes"));
        sizes = std::move(given);
    } else if (auto attr = node.ints_attr("split"); !attr) {
        return tl::unexpected(attr.error());
    } else if (*attr) {
        sizes = **attr;
    } else {
        const ValueInfo* in = node.info(0);
        const auto parts = static_cast<std::int64_t>(node.output_count());
        std::int64_t len = 0;
        if (in != nullptr)
            if (auto ax = normal_axis(axis, in->rank()); ax && !in->dims[static_cast<std::size_t>(*ax)].batch)
                len = in->dims[static_cast<std::size_t>(*ax)].value;
        PSRUN_TRY_ASSIGN(auto num_outputs, node.int_attr("num_outputs", 0));  // opset 18: the last part may be smaller
        if (num_outputs != 0 && num_outputs != parts)
            return tl::unexpected(node.refuse("num_outputs " + std::to_string(num_outputs) + " for " +
                                              std::to_string(parts) + " outputs"));
        if (len == 0 || (num_outputs == 0 && len % parts != 0) || (len + parts - 1) / parts * (parts - 1) >= len)
            return tl::unexpected(
                node.refuse("without sizes the axis must split into " + std::to_string(parts) + " equal parts"));
        const std::int64_t part = (len + parts - 1) / parts;
        sizes.assign(static_cast<std::size_t>(parts), part);
        sizes.back() = len - part * (parts - 1);
    }
    if (sizes.size() != node.output_count())
        return tl::unexpected(node.refuse(std::to_string(sizes.size()) + " sizes for " +
                                          std::to_string(node.output_count()) + " outputs"));
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "split"}, {"inputs", {x}}, {"axis", axis}, {"sizes", sizes}}));
    for (std::size_t k = 0; k < sizes.size(); ++k) node.bind_output(k, k == 0 ? name : name + ":" + std::to_string(k));
    return {};
}

Result<void> export_concat(OnnxNodeExport& out) {
    std::vector<std::string> inputs;
    for (std::size_t i = 0; i < out.node().data_inputs; ++i) inputs.push_back(out.input(i));
    out.add("Concat", inputs, {out.output(0)}, {{"axis", out.node().attrs.at("axis").get<std::int64_t>()}},
            out.node().name);
    return {};
}

Result<void> export_split(OnnxNodeExport& out) {
    const Node& node = out.node();
    const auto sizes = node.attrs.at("sizes").get<std::vector<std::int64_t>>();
    std::vector<std::string> outputs;
    for (std::size_t k = 0; k < sizes.size(); ++k) outputs.push_back(out.output(k));
    out.add("Split", {out.input(0), out.int64_constant(node.name + "/sizes", sizes)}, outputs,
            {{"axis", node.attrs.at("axis").get<std::int64_t>()}}, node.name);
    return {};
}

}  // namespace

const OpSchema& concat_schema() {
    static const OpSchema s{"concat", 1, -1, parse_concat, infer_concat, {"Concat"}, import_concat, export_concat};
    return s;
}

const OpSchema& split_schema() {
    static const OpSchema s{"split", 1, 1, parse_split, infer_split, {"Split"}, import_split, export_split};
    return s;
}

}  // namespace psrun::nn
