// Reading and writing whole slices at index tuples computed in the graph, as torch.onnx writes
// slice assignment (`h[:, 0] = 0`, `out[:, 1:5] = x`: ScatterND) and advanced indexing
// (`h[torch.arange(n), j]`, torch.diagonal: GatherND):
//   {"kind": "scatter_nd", "inputs": ["data", "indices", "updates"], "reduction": "none"}: the
//     data with, for each index tuple t = indices[i] (its last dim k <= data's rank), the
//     slice data[t] replaced by updates[i] ("add": added to it);
//   {"kind": "gather_nd", "inputs": ["data", "indices"], "batch_dims": 0}: out[i] =
//     data[indices[i]]; batch_dims 1: out[n, i] = data[n, indices[n, i]] (torch.diagonal).
// Index tuples address the whole value, the batch axis first (torch's tuples start with
// arange(N)), or each example's (batch_dims 1); a negative entry counts from the end; a tuple outside the value writes
// nothing and reads zeros (never out of bounds). Float data and updates, integer indices; indices carry the batch axis
// first. Shapes: updates (and gather_nd's output) are indices.dims[:-1] + data.dims[k:]. Gradients: scatter_nd's data
// gets dOut with the replaced slices zeroed ("add": all of dOut), its updates dOut at their tuples; gather_nd's data
// the sum of dOut at each tuple. Duplicate tuples in a "none" scatter: the last wins. No tensors. FLOPs: 1 per element
// moved. ONNX: ScatterND (reduction none or add, opsets 11 to 18), GatherND (batch_dims 0 or 1).
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_scatter_nd(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto reduction, reader.choice("reduction", 0, {"none", "add"}));
    attrs["reduction"] = reduction == 0 ? "none" : "add";
    return {};
}

Result<void> parse_gather_nd(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto batch_dims, reader.integer("batch_dims", 0, 0, 1));
    attrs["batch_dims"] = batch_dims;
    return {};
}

// indices.dims[:-1] + data.dims[batch_dims + k:], checking the types and k.
Result<Dims> slices_of(InferContext& context) {
    const ValueInfo& data = context.input(0);
    const ValueInfo& indices = context.input(1);
    if (data.type != ElementType::kFloat)
        return tl::unexpected(op_error("expects float data; " + context.input_name(0) + " holds integers"));
    if (indices.type != ElementType::kInt)
        return tl::unexpected(op_error("expects integer indices; " + context.input_name(1) + " holds floats"));
    if (indices.rank() < 2 || !indices.dims[0].batch)
        return tl::unexpected(op_error("indices " + to_string(indices.dims) +
                                       " must have the batch axis first and the index tuples last"));
    const std::int64_t batch_dims = context.node().op == "gather_nd" ? context.attr_int("batch_dims") : 0;
    const auto addressed = static_cast<std::int64_t>(data.rank()) - batch_dims;
    const Dim k = indices.dims.back();
    if (k.batch || k.value < 1 || k.value > addressed)
        return tl::unexpected(op_error("index tuples of " + to_string(indices.dims) + " must have 1 to " +
                                       std::to_string(addressed) + " entries (the dims of " + to_string(data.dims) +
                                       " they address)"));
    if (batch_dims == 1 && indices.dims[0] != data.dims[0])
        return tl::unexpected(op_error("batch_dims 1: indices " + to_string(indices.dims) + " and data " +
                                       to_string(data.dims) + " must share their first dim"));
    Dims out(indices.dims.begin(), indices.dims.end() - 1);
    out.insert(out.end(), data.dims.begin() + batch_dims + k.value, data.dims.end());
    if (out.size() > 6) return tl::unexpected(op_error("the slices would have more than 6 dims"));
    return out;
}

Result<void> infer_scatter_nd(InferContext& context) {
    PSRUN_TRY_ASSIGN(auto slices, slices_of(context));
    const ValueInfo& updates = context.input(2);
    if (updates.type != ElementType::kFloat)
        return tl::unexpected(op_error("expects float updates; " + context.input_name(2) + " holds integers"));
    if (updates.dims != slices)
        return tl::unexpected(op_error("updates " + context.input_name(2) + " are " + to_string(updates.dims) +
                                       "; indices and data make them " + to_string(slices)));
    context.set_output(0, ValueInfo{context.input(0).dims, ElementType::kFloat});
    context.add_flops(static_cast<double>(elements_per_example(slices).value_or(0)));
    return {};
}

Result<void> infer_gather_nd(InferContext& context) {
    PSRUN_TRY_ASSIGN(auto slices, slices_of(context));
    context.set_output(0, ValueInfo{slices, ElementType::kFloat});
    context.add_flops(static_cast<double>(elements_per_example(slices).value_or(0)));
    return {};
}

Result<void> import_nd(OnnxNodeImport& node) {
    const bool scatter = node.op_type() == "ScatterND";
    nlohmann::json inputs = nlohmann::json::array();
    for (std::size_t i = 0; i < (scatter ? 3u : 2u); ++i) {
        PSRUN_TRY_ASSIGN(auto v, node.value(i));
        inputs.push_back(v);
    }
    nlohmann::json layer = {{"kind", scatter ? "scatter_nd" : "gather_nd"}, {"inputs", inputs}};
    if (scatter) {
        PSRUN_TRY_ASSIGN(auto r, node.string_attr("reduction", "none"));
        if (r != "none" && r != "add")
            return tl::unexpected(node.refuse("reduction \"" + r + "\" is not supported (none or add)"));
        layer["reduction"] = r;
    } else {
        PSRUN_TRY_ASSIGN(auto batch_dims, node.int_attr("batch_dims", 0));
        if (batch_dims != 0 && batch_dims != 1)
            return tl::unexpected(node.refuse("batch_dims " + std::to_string(batch_dims) +
                                              " is not supported (0, or 1: the batch axis)"));
        layer["batch_dims"] = batch_dims;
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    node.bind_output(0, name);
    return {};
}

Result<void> export_nd(OnnxNodeExport& out) {
    const Node& node = out.node();
    if (node.op == "gather_nd") {
        out.add("GatherND", {out.input(0), out.input(1)}, {out.output(0)},
                {{"batch_dims", node.attrs.at("batch_dims").get<std::int64_t>()}}, node.name);
        return {};
    }
    std::vector<std::pair<std::string, OnnxAttr>> attrs;
    if (node.attrs.at("reduction") == "add") {
        attrs.emplace_back("reduction", std::string("add"));
        out.require_opset(16);
    }
    out.add("ScatterND", {out.input(0), out.input(1), out.input(2)}, {out.output(0)}, attrs, node.name);
    return {};
}

}  // namespace

const OpSchema& scatter_nd_schema() {
    static const OpSchema s{"scatter_nd",  3,         3,        parse_scatter_nd, infer_scatter_nd,
                            {"ScatterND"}, import_nd, export_nd};
    return s;
}

const OpSchema& gather_nd_schema() {
    static const OpSchema s{"gather_nd", 2, 2, parse_gather_nd, infer_gather_nd, {"GatherND"}, import_nd, export_nd};
    return s;
}

}  // namespace psrun::nn
