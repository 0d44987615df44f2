// Broadcast a value (floats, or integers: a mask) to a shape (numpy rules both ways, as ONNX's
// Expand):
//   {"kind": "expand", "shape": [d, ...]}: each d a positive integer, "N" or "kN" (a multiple of
//   the batch size); the output is the broadcast of the input's shape and `shape` (a 1 in
//   `shape` keeps the input's dim). A class token [1, 1, D] expanded to ["N", 1, D] is the use,
//   and a learned initial state [1, 1, H] expanded to [1, "N", H] for an LSTM (the batch on any
//   one axis).
// Gradient: dY summed over the axes the input was broadcast along. No tensors. FLOPs: 1 per
// output element.
// ONNX: Expand with a shape known at import, batch-dependent included (Concat(Shape(x)[0], 1, D),
// which the importer evaluates to [N, 1, D]).
#include <algorithm>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/fixed_batch.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Dims shape_of(const nlohmann::json& shape) {
    Dims dims;
    for (const auto& d : shape) dims.push_back(*parse_dim(d));
    return dims;
}

Result<void> parse_expand(FieldReader& reader, nlohmann::json& attrs) {
    if (!reader.has("shape")) return tl::unexpected(reader.fail("shape", "missing (a list of dims)"));
    const auto& shape = reader.raw("shape");
    if (!shape.is_array() || shape.size() > 6)
        return tl::unexpected(reader.fail("shape", "expected up to 6 dims, got " + describe_value(shape)));
    nlohmann::json canonical = nlohmann::json::array();
    for (const auto& v : shape) {
        const auto d = parse_dim(v);
        if (!d)
            return tl::unexpected(
                reader.fail("shape", "expected positive integers, \"N\" or \"kN\", got " + describe_value(v)));
        canonical.push_back(d->batch ? nlohmann::json(d->to_string()) : nlohmann::json(d->value));
    }
    attrs["shape"] = canonical;
    return {};
}

Result<void> infer_expand(InferContext& context) {
    const ValueInfo& in = context.input(0);
    auto dims = broadcast_dims(in.dims, shape_of(context.attrs().at("shape")));
    if (!dims) return tl::unexpected(op_error(dims.error().message));
    if (std::count_if(dims->begin(), dims->end(), [](const Dim& d) { return d.batch; }) > 1)
        return tl::unexpected(op_error("the result " + to_string(*dims) + " has the batch on more than one axis"));
    context.set_output(0, ValueInfo{*dims, in.type});
    context.add_flops(static_cast<double>(elements_per_example(*dims).value_or(0)));
    return {};
}

Result<void> import_expand(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    auto shape = node.symbolic_ints(1);
    if (!shape) return tl::unexpected(node.refuse("its shape is computed at run time: the engine needs it at import"));
    if (const ValueInfo* in = node.info(0); node.file_batch() == 1 && in != nullptr) {
        // At 1 the shape does not say which of its 1s was the batch, if any: the importer
        // chooses, the shape as written (no batch) last.
        auto readings = expand_readings_at_batch_one(in->dims, *shape);
        if (!readings.empty()) {
            readings.push_back(*shape);
            shape = readings[std::min(node.choose_reading(readings.size()), readings.size() - 1)];
        }
    } else if (node.file_batch() > 1 && in != nullptr) {  // a file of fixed batch size
        if (auto at_batch = expand_shape_at_fixed_batch(in->dims, *shape, node.file_batch())) shape = *at_batch;
    }
    nlohmann::json target = nlohmann::json::array();
    for (const auto& d : *shape) {
        if (!d.batch && d.value < 1)
            return tl::unexpected(node.refuse("shape entry " + std::to_string(d.value) + " is not positive"));
        target.push_back(d.batch ? nlohmann::json(d.to_string()) : nlohmann::json(d.value));
    }
    const ValueInfo* info = node.info(0);
    if (info != nullptr) {  // the same shape: nothing to do
        auto dims = broadcast_dims(info->dims, *shape);
        if (dims && *dims == info->dims) {
            node.bind_output(0, x);
            return {};
        }
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "expand"}, {"inputs", {x}}, {"shape", target}}));
    node.bind_output(0, name);
    return {};
}

Result<void> export_expand(OnnxNodeExport& out) {
    const Node& node = out.node();
    const Dims dims = out.model().value(node.outputs.at(0)).dims;
    // The batch's size is Shape(x)[0] at run time: the shape is Concat(before, Shape(x)[0:1] * k,
    // after) around the batch axis.
    const auto at = std::find_if(dims.begin(), dims.end(), [](const Dim& d) { return d.batch; });
    if (at == dims.end()) {
        std::vector<std::int64_t> fixed;
        for (const auto& d : dims) fixed.push_back(d.value);
        out.add("Expand", {out.input(0), out.int64_constant(node.name + "/shape", fixed)}, {out.output(0)}, {},
                node.name);
        return {};
    }
    std::vector<std::int64_t> before, after;
    for (auto d = dims.begin(); d != dims.end(); ++d)
        if (d != at) (d < at ? before : after).push_back(d->value);
    const std::string shape = out.fresh(node.name + "/shape"), batch = out.fresh(node.name + "/batch"),
                      target = out.fresh(node.name + "/target");
    const std::string source = out.model_input();  // its ONNX name ("images" for an image model)
    out.add("Shape", {source}, {shape}, {}, node.name + "/shape");
    out.add("Slice",
            {shape, out.int64_constant(node.name + "/start", {0}), out.int64_constant(node.name + "/end", {1})},
            {batch}, {}, node.name + "/batch");
    std::string scaled = batch;
    if (at->value != 1) {
        scaled = out.fresh(node.name + "/scaled");
        out.add("Mul", {batch, out.int64_constant(node.name + "/k", {at->value})}, {scaled}, {}, node.name + "/scaled");
    }
    std::vector<std::string> parts;
    if (!before.empty()) parts.push_back(out.int64_constant(node.name + "/before", before));
    parts.push_back(scaled);
    if (!after.empty()) parts.push_back(out.int64_constant(node.name + "/rest", after));
    out.add("Concat", parts, {target}, {{"axis", std::int64_t{0}}}, node.name + "/target");
    out.add("Expand", {out.input(0), target}, {out.output(0)}, {}, node.name);
    return {};
}

}  // namespace

const OpSchema& expand_schema() {
    static const OpSchema schema{"expand", 1, 1, parse_expand, infer_expand, {"Expand"}, import_expand, export_expand};
    return schema;
}

}  // namespace psrun::nn
