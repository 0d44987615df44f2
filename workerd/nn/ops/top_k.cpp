// The k largest (or smallest) entries along one axis of each example, and where they lie:
//   {"kind": "top_k", "inputs": ["x"], "axis": -1, "k": 5, "largest": true}: outputs "<name>"
//   (the values, largest first, or smallest first) and "<name>:1" (their indices along the
//   axis, integers), as torch.topk, torch.sort (k = the axis' length) and ONNX's TopK.
// Ties: the lower index first (ONNX's rule); NaN counts as larger than any number (torch's).
// The axis may be negative (from the end; canonical form: as given) and cannot be the batch
// axis; 1 <= k <= the axis' length. Floats in. Gradient: dX is dValues scattered to the indices
// (0 elsewhere), torch's; the indices have none (a mixture-of-experts router's top-k
// selection, k-max pooling, argmax for a gather). No tensors. FLOPs: 1 per input element.
// ONNX: TopK (k a constant input from opset 10, an attribute before; `sorted` 0 is served
// sorted, which it allows), ArgMax and ArgMin (top_k with k = 1, its indices, squeezed unless
// keepdims; select_last_index 1 refused).
#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_top_k(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axis, reader.integer("axis", -1, -6, 5));
    PSRUN_TRY_ASSIGN(auto k, reader.integer("k", std::nullopt, 1, std::int64_t{1} << 30));
    PSRUN_TRY_ASSIGN(auto largest, reader.boolean("largest", true));
    attrs["axis"] = axis;
    attrs["k"] = k;
    attrs["largest"] = largest;
    return {};
}

Result<void> infer_top_k(InferContext& context) {
    const ValueInfo& in = context.input(0);
    const auto rank = static_cast<std::int64_t>(in.rank());
    const std::int64_t given = context.attr_int("axis");
    const std::int64_t axis = given < 0 ? given + rank : given;
    if (axis < 0 || axis >= rank)
        return tl::unexpected(
            op_error("axis " + std::to_string(given) + " is outside the input's " + std::to_string(rank) + " dims"));
    const auto at = static_cast<std::size_t>(axis);
    if (in.dims[at].batch)
        return tl::unexpected(op_error("axis " + std::to_string(given) + " of " + to_string(in.dims) +
                                       " is the batch axis; select along a dim of each example"));
    const std::int64_t k = context.attr_int("k");
    if (k > in.dims[at].value)
        return tl::unexpected(op_error("k " + std::to_string(k) + " is larger than dim " + std::to_string(axis) +
                                       " of " + to_string(in.dims) + "; k must be at most " +
                                       std::to_string(in.dims[at].value)));
    Dims out = in.dims;
    out[at].value = k;
    context.set_output(0, ValueInfo{out, in.type});
    context.set_output(1, ValueInfo{out, ElementType::kInt});
    context.add_flops(static_cast<double>(elements_per_example(in.dims).value_or(0)));
    return {};
}

// TopK, or ArgMax/ArgMin as a top_k of k = 1 whose indices are the output.
Result<void> import_top_k(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const auto op = node.op_type();
    nlohmann::json layer = {{"kind", "top_k"}, {"inputs", {x}}};
    const ValueInfo* in = node.info(0);
    if (op == "TopK") {
        // Sorting the batch (argsort of a per-example score, k = N) mixes the examples.
        PSRUN_TRY_ASSIGN(auto along, node.int_attr("axis", -1));
        const auto rank = in != nullptr ? static_cast<std::int64_t>(in->rank()) : 0;
        if (in != nullptr && along >= -rank && along < rank &&
            in->dims[static_cast<std::size_t>(along < 0 ? along + rank : along)].batch)
            return tl::unexpected(node.refuse(
                "it sorts along the batch axis: each example must stay apart (pack_padded_sequence's sort into "
                "LSTM, GRU or RNN sequence_lens is the one sort of the batch the importer takes)"));
        std::int64_t k = 0;
        if (node.opset() < 10) {
            PSRUN_TRY_ASSIGN(k, node.int_attr("k", 0));
        } else {
            const auto given = node.ints(1);
            if (!given || given->size() != 1)
                return tl::unexpected(node.refuse("k must be a constant (known at import)"));
            k = (*given)[0];
        }
        if (k < 1) return tl::unexpected(node.refuse("k " + std::to_string(k) + " selects nothing; k must be >= 1"));
        PSRUN_TRY_ASSIGN(auto axis, node.int_attr("axis", -1));
        PSRUN_TRY_ASSIGN(auto largest, node.int_attr("largest", 1));
        layer.update({{"axis", axis}, {"k", k}, {"largest", largest != 0}});
        PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
        node.bind_output(0, name);
        if (node.output_count() > 1) node.bind_output(1, name + ":1");
        return {};
    }
    PSRUN_TRY_ASSIGN(auto axis, node.int_attr("axis", 0));
    PSRUN_TRY_ASSIGN(auto keepdims, node.int_attr("keepdims", 1));
    PSRUN_TRY_ASSIGN(auto last, node.int_attr("select_last_index", 0));
    if (last != 0)
        return tl::unexpected(
            node.refuse("select_last_index 1 (the last of equal values) is not supported; the "
                        "engine's ties go to the first index"));
    layer.update({{"axis", axis}, {"k", 1}, {"largest", op == "ArgMax"}});
    PSRUN_TRY_ASSIGN(auto name, node.emit(layer));
    std::string indices = name + ":1";
    if (keepdims == 0) {
        PSRUN_TRY_ASSIGN(
            indices, node.emit({{"kind", "squeeze"}, {"inputs", {indices}}, {"axes", nlohmann::json::array({axis})}}));
    }
    node.bind_output(0, indices);
    return {};
}

Result<void> export_top_k(OnnxNodeExport& out) {
    const Node& node = out.node();
    out.add("TopK", {out.input(0), out.int64_constant(node.name + "/k", {node.attrs.at("k").get<std::int64_t>()})},
            {out.output(0), out.output(1)},
            {{"axis", node.attrs.at("axis").get<std::int64_t>()},
             {"largest", std::int64_t{node.attrs.at("largest").get<bool>() ? 1 : 0}},
             {"sorted", std::int64_t{1}}},
            node.name);
    return {};
}

}  // namespace

const OpSchema& top_k_schema() {
    static const OpSchema s{"top_k",      1,           1, parse_top_k, infer_top_k, {"TopK", "ArgMax", "ArgMin"},
                            import_top_k, export_top_k};
    return s;
}

}  // namespace psrun::nn
