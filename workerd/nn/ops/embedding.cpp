// Lookups by index:
//   embedding: {"kind": "embedding", "vocabulary": V, "dim": D, "init": normal(0, 1)}: reads
//     int ids [N, ...] and gives their rows of the table, [N, ..., D] floats (PyTorch's
//     nn.Embedding; its default init). Tensor: table [V, D] (slot "table"). An id outside
//     [0, V) stops the step with an error naming the example. "padding_index": P (absent: none;
//     in [0, V)) is PyTorch's padding_idx: row P's gradient is 0, so the row never changes, and
//     a table the engine initialises starts with row P zero. ONNX: Gather(table, ids).
//   gather: {"kind": "gather", "axis": a, "indices": i | [i, ...]}: constant indices into a
//     float value along a non-batch axis (ONNX's Gather with a constant index: y[:, -1, :]
//     after an LSTM). A single index removes the axis, a list keeps it with that many entries;
//     indices may be negative (from the end; canonical form: as given). No tensors. ONNX:
//     Gather.
// ONNX import: Gather whose data is a float initializer [V, D] and whose indices are an int
// graph value is an embedding (the initializer bound to "table"); Gather of a float graph value
// with constant indices is a gather (indices of 2 or more dims, F.unfold's, a gather of the
// flat list and a reshape). Gathers on shapes never get here: the importer
// evaluates them.
#include <algorithm>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> parse_embedding(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto vocabulary, reader.integer("vocabulary", std::nullopt, 1, kMaxTensorElements));
    PSRUN_TRY_ASSIGN(auto dim, reader.integer("dim", std::nullopt, 1, kMaxTensorElements));
    Initializer init{InitKind::kNormal, 1.0};
    if (reader.has("init")) {
        PSRUN_TRY_ASSIGN(auto parsed, parse_initializer(reader.raw("init"), reader.where() + ": field \"init\""));
        init = parsed;
    }
    attrs["vocabulary"] = vocabulary;
    attrs["dim"] = dim;
    attrs["init"] = to_json(init);
    if (reader.has("padding_index")) {  // written only when given: older descriptions hash as before
        PSRUN_TRY_ASSIGN(auto padding, reader.integer("padding_index", std::nullopt, 0, vocabulary - 1));
        attrs["padding_index"] = padding;
    }
    return {};
}

// nn.Embedding(padding_idx=P) exports as a plain Gather: PyTorch zeroes row P at init and never
// gives it a gradient, so a file's table has exactly that row all zeros, before and after
// training, where no drawn row is. Such a row imports as padding_index; nullopt otherwise.
std::optional<std::int64_t> zero_row(const std::vector<float>& table, std::int64_t rows, std::int64_t dim) {
    if (rows < 2 || static_cast<std::int64_t>(table.size()) != rows * dim) return std::nullopt;
    std::optional<std::int64_t> found;
    for (std::int64_t r = 0; r < rows; ++r) {
        const auto* row = table.data() + r * dim;
        if (std::any_of(row, row + dim, [](float v) { return v != 0.0f; })) continue;
        if (found) return std::nullopt;  // two zero rows: a zero-initialised table, not a padding row
        found = r;
    }
    return found;
}

Result<void> infer_embedding(InferContext& context) {
    const ValueInfo& in = context.input(0);
    if (in.type != ElementType::kInt)
        return tl::unexpected(op_error(std::string("expects int ids [N, ...], got ") + to_string(in.type) + " " +
                                       to_string(in.dims) + " (an embedding looks up rows by id)"));
    if (in.rank() > 5) return tl::unexpected(op_error("the output would have more than 6 dims"));
    const std::int64_t vocabulary = context.attr_int("vocabulary"), dim = context.attr_int("dim");
    Dims out = in.dims;
    out.push_back(Dim::of(dim));
    const auto count = elements_per_example(out);
    if (!count) return tl::unexpected(op_error("the output " + to_string(out) + " has more than 2^31-1 elements"));
    context.set_output(0, ValueInfo{out});
    if (auto ok = context.tensor("table", {vocabulary, dim}, attr_initializer(context.attrs(), "init")); !ok) return ok;
    context.add_flops(0);  // a copy per output element, no arithmetic
    return {};
}

Result<void> parse_gather(FieldReader& reader, nlohmann::json& attrs) {
    PSRUN_TRY_ASSIGN(auto axis, reader.integer("axis", std::nullopt, -6, 5));
    if (!reader.has("indices"))
        return tl::unexpected(reader.fail("indices", "missing (an integer or a list of integers)"));
    const auto& raw = reader.raw("indices");
    const auto is_index = [](const nlohmann::json& v) {
        return v.is_number_integer() && v.get<std::int64_t>() > -kMaxTensorElements &&
               v.get<std::int64_t>() < kMaxTensorElements;
    };
    bool ok = is_index(raw);
    if (raw.is_array()) {
        ok = !raw.empty() && raw.size() <= 65536;
        for (const auto& v : raw) ok = ok && is_index(v);
    }
    if (!ok)
        return tl::unexpected(
            reader.fail("indices", "expected an integer or a list of 1 to 65536 integers, got " + describe_value(raw)));
    attrs["axis"] = axis;
    attrs["indices"] = raw;
    return {};
}

Result<void> infer_gather(InferContext& context) {
    const ValueInfo& in = context.input(0);
    const auto rank = static_cast<std::int64_t>(in.rank());
    std::int64_t axis = context.attr_int("axis");
    if (axis < 0) axis += rank;
    if (axis < 0 || axis >= rank)
        return tl::unexpected(op_error("axis " + std::to_string(context.attr_int("axis")) + " is outside the input's " +
                                       std::to_string(rank) + " dims"));
    const Dim along = in.dims[static_cast<std::size_t>(axis)];
    if (along.batch)
        return tl::unexpected(op_error("axis " + std::to_string(axis) + " of " + to_string(in.dims) +
                                       " is the batch axis: constant indices can only select along another"));
    const auto& indices = context.attrs().at("indices");
    std::vector<std::int64_t> list;
    if (indices.is_array()) list = indices.get<std::vector<std::int64_t>>();
    else list.push_back(indices.get<std::int64_t>());
    for (const auto i : list)
        if (i < -along.value || i >= along.value)
            return tl::unexpected(op_error("index " + std::to_string(i) + " is outside [-" +
                                           std::to_string(along.value) + ", " + std::to_string(along.value) +
                                           ") (axis " + std::to_string(axis) + " of " + to_string(in.dims) + ")"));
    Dims out(in.dims.begin(), in.dims.begin() + axis);
    if (indices.is_array()) out.push_back(Dim::of(static_cast<std::int64_t>(list.size())));
    out.insert(out.end(), in.dims.begin() + axis + 1, in.dims.end());
    if (out.empty() || (has_batch(in.dims) && !has_batch(out)))
        return tl::unexpected(op_error("the output " + to_string(out) + " would have no batch axis"));
    context.set_output(0, ValueInfo{out, in.type});
    context.add_flops(0);
    return {};
}

Result<void> import_gather(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto axis, node.int_attr("axis", 0));
    const ValueInfo* indices = node.info(1);
    const std::string table = node.initializer(0);
    if (!table.empty() && indices != nullptr && indices->type == ElementType::kInt) {
        const auto dims = node.constant_shape(0);
        if (!dims || dims->size() != 2 || axis != 0)
            return tl::unexpected(node.refuse("an embedding lookup needs a [V, D] table gathered along axis 0"));
        PSRUN_TRY_ASSIGN(auto ids, node.value(1));
        nlohmann::json layer = {{"kind", "embedding"},
                                {"inputs", {ids}},
                                {"vocabulary", (*dims)[0]},
                                {"dim", (*dims)[1]},
                                {"tensors", {{"table", table}}}};
        if (const auto values = node.floats(0))
            if (const auto padding = zero_row(*values, (*dims)[0], (*dims)[1])) layer["padding_index"] = *padding;
        PSRUN_TRY_ASSIGN(auto name, node.emit(std::move(layer)));
        node.bind_output(0, name);
        return {};
    }
    if (!table.empty() && indices == nullptr) {
        // Rows 0..T-1 of a float initializer by constant indices: a learned positional embedding
        // read at torch.arange(T) positions. The whole table (T = V) is the table itself, a prefix
        // a slice of it; the initializer stays one tensor under its own name either way.
        const auto dims = node.constant_shape(0);
        const auto list = node.ints(1);
        const auto shape = node.constant_shape(1);
        bool prefix = dims && !dims->empty() && axis == 0 && list && shape && shape->size() == 1 && !list->empty() &&
                      static_cast<std::int64_t>(list->size()) <= (*dims)[0];
        for (std::size_t k = 0; prefix && k < list->size(); ++k) prefix = (*list)[k] == static_cast<std::int64_t>(k);
        if (prefix) {
            PSRUN_TRY_ASSIGN(auto x, node.value(0));
            if (static_cast<std::int64_t>(list->size()) == (*dims)[0]) {
                node.bind_output(0, x);
                return {};
            }
            PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "slice"},
                                                   {"inputs", {x}},
                                                   {"axes", {0}},
                                                   {"starts", {0}},
                                                   {"ends", {static_cast<std::int64_t>(list->size())}}}));
            node.bind_output(0, name);
            return {};
        }
    }
    ValueInfo table_info;
    const ValueInfo* data = node.info(0);
    if (data == nullptr && !table.empty() && indices == nullptr) {
        // Entries of a float initializer (a parameter) by constant indices: Swin's relative
        // position bias, table[relative_position_index].
        if (const auto dims = node.constant_shape(0); dims && !dims->empty()) {
            for (const auto d : *dims) table_info.dims.push_back(Dim::of(d));
            data = &table_info;
        }
    }
    if (data == nullptr || data->type != ElementType::kFloat)
        return tl::unexpected(
            node.refuse("the engine gathers rows of a float initializer by int ids (an embedding), "
                        "its first rows in order (positions 0..T-1), or entries of a float value by "
                        "constant indices; this Gather is none of these"));
    const auto list = node.ints(1);
    const auto shape = node.constant_shape(1);
    if ((!list || !shape) && axis == 0 && indices != nullptr && indices->type == ElementType::kInt &&
        !indices->dims.empty() && indices->dims[0].batch) {
        // Rows picked by indices computed per example along a batch-sized axis 0 (torch's
        // `h[torch.arange(n), j]`: the flattened value's row n * C + j): a gather_nd of 1-tuples.
        PSRUN_TRY_ASSIGN(auto x, node.value(0));
        PSRUN_TRY_ASSIGN(auto ids, node.value(1));
        PSRUN_TRY_ASSIGN(auto tuples, node.emit({{"kind", "unsqueeze"}, {"inputs", {ids}}, {"axes", {-1}}}));
        PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "gather_nd"}, {"inputs", {x, tuples}}, {"batch_dims", 0}}));
        node.bind_output(0, name);
        return {};
    }
    if (!list || !shape)
        return tl::unexpected(node.refuse("its indices must be constant (they are computed at run time)"));
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const nlohmann::json index = shape->empty() ? nlohmann::json(list->front()) : nlohmann::json(*list);
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "gather"}, {"inputs", {x}}, {"axis", axis}, {"indices", index}}));
    if (shape->size() > 1) {
        // Indices of several dims (F.unfold's [blocks, kernel] positions): the entries gathered
        // by the flat list, then reshaped to data's dims with the indices' dims at `axis`.
        const auto a = static_cast<std::size_t>(axis < 0 ? axis + static_cast<std::int64_t>(data->rank()) : axis);
        if (a >= data->rank()) return tl::unexpected(node.refuse("axis " + std::to_string(axis) + " out of range"));
        nlohmann::json target = nlohmann::json::array();
        for (std::size_t d = 0; d < data->rank(); ++d) {
            if (d != a) {
                const Dim& dim = data->dims[d];
                target.push_back(dim.batch ? nlohmann::json(dim.to_string()) : nlohmann::json(dim.value));
                continue;
            }
            for (const auto extent : *shape) target.push_back(extent);
        }
        PSRUN_TRY_ASSIGN(auto shaped, node.emit({{"kind", "reshape"}, {"inputs", {name}}, {"shape", target}}));
        name = shaped;
    }
    node.bind_output(0, name);
    return {};
}

Result<void> export_embedding(OnnxNodeExport& out) {
    out.add("Gather", {out.input(1), out.input(0)}, {out.output(0)}, {{"axis", std::int64_t{0}}}, out.node().name);
    return {};
}

Result<void> export_gather(OnnxNodeExport& out) {
    const Node& node = out.node();
    const auto& indices = node.attrs.at("indices");
    std::string name;
    if (indices.is_array()) {
        name = out.int64_constant(node.name + "/indices", indices.get<std::vector<std::int64_t>>());
    } else {  // a 0-D index: a one-element initializer reshaped to a scalar
        const std::string one = out.int64_constant(node.name + "/index", {indices.get<std::int64_t>()});
        name = out.fresh(node.name + "/scalar");
        out.add("Squeeze", {one, out.int64_constant(node.name + "/axes", {0})}, {name}, {}, node.name + "/scalar");
    }
    out.add("Gather", {out.input(0), name}, {out.output(0)}, {{"axis", node.attrs.at("axis").get<std::int64_t>()}},
            node.name);
    return {};
}

}  // namespace

const OpSchema& embedding_schema() {
    static const OpSchema s{"embedding",      1,    1, parse_embedding, infer_embedding, {"Gather"}, import_gather,
                            export_embedding, false};
    return s;
}

const OpSchema& gather_schema() {
    static const OpSchema s{"gather", 1, 1, parse_gather, infer_gather, {}, nullptr, export_gather};
    return s;
}

}  // namespace psrun::nn
