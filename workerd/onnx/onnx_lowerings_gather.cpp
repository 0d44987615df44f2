// GatherElements (torch.gather: the log-probability of each label in a focal loss, the value of
// each chosen action in RL) and ScatterElements (x.scatter(axis, idx, v): a one-hot written by
// scatter) as a one-hot mask and sums (onnx_lowerings.h). With data of dims [..., C at axis, ...]
// and int indices of the same rank, equal to data's dims but at the axis (K there):
//   at   = indices + C * (indices < 0)                                  (negative: from the end)
//   mask = cast(equal(unsqueeze(at, -1), [0, 1, ..., C-1]))            [..., K at axis, ..., C]
//   gather:  out = reduce_sum(unsqueeze(moveaxis(data, axis, -1), axis) * mask, -1)
//   scatter: put = moveaxis(reduce_sum(mask * unsqueeze(updates, -1), axis), -1, axis)
//            hit = moveaxis(reduce_max(mask, axis), -1, axis)
//            out = data * (1 - hit) + put   (reduction "none"), data + put ("add")
// so the indices may be computed at run time (the labels), and the gradient reaches each
// gathered entry, each kept entry of the data and each scattered update through the muls. An
// index outside [-C, C) gathers 0 and scatters nothing (no error at run time); where two indices
// of a scatter "none" meet, their updates add (ONNX leaves that order undefined).
// Gather of a table without a batch axis by ids computed at run time (class weights picked by
// the labels, weight[target]) reads the same mask: out = reduce_sum(mask [ids..., V, 1...] *
// table [V, ...], the V axis).
#include <string>
#include <vector>

#include "workerd/onnx/onnx_lowerings.h"

namespace psrun::onnx_io {

namespace {

struct OneHot {
    std::string mask;  // floats [..., K at axis, ..., C]
    std::int64_t axis = 0, rank = 0;
};

// The one-hot mask of int `indices` (a value of `rank` dims) over `classes` entries: floats of
// the indices' dims plus one last axis of `classes`; a negative index counts from the end.
Result<std::string> one_hot_mask(nn::OnnxNodeImport& node, const std::string& indices, std::int64_t rank,
                                 std::int64_t classes) {
    auto int_constant = [&node](nlohmann::json shape, nlohmann::json values) {
        return node.emit({{"kind", "constant"}, {"type", "int"}, {"shape", shape}, {"values", values}});
    };
    PSRUN_TRY_ASSIGN(auto zero, int_constant(nlohmann::json::array(), {0}));
    PSRUN_TRY_ASSIGN(auto width, int_constant(nlohmann::json::array(), {classes}));
    PSRUN_TRY_ASSIGN(auto negative, node.emit({{"kind", "less"}, {"inputs", {indices, zero}}}));
    PSRUN_TRY_ASSIGN(auto shift, node.emit({{"kind", "mul"}, {"inputs", {negative, width}}}));
    PSRUN_TRY_ASSIGN(auto at, node.emit({{"kind", "add"}, {"inputs", {indices, shift}}}));
    std::vector<std::int64_t> range;
    for (std::int64_t c = 0; c < classes; ++c) range.push_back(c);
    PSRUN_TRY_ASSIGN(auto classes_value, int_constant({classes}, range));
    PSRUN_TRY_ASSIGN(auto wide, node.emit({{"kind", "unsqueeze"}, {"inputs", {at}}, {"axes", {rank}}}));
    PSRUN_TRY_ASSIGN(auto hit, node.emit({{"kind", "equal"}, {"inputs", {wide, classes_value}}}));
    return node.emit({{"kind", "cast"}, {"inputs", {hit}}, {"to", "float"}});
}

// The checks GatherElements and ScatterElements share and the one-hot mask of the indices
// (input 1) along the axis of the data (input 0).
Result<OneHot> one_hot_of_indices(nn::OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto indices, node.value(1));
    const nn::ValueInfo* d = node.info(0);
    const nn::ValueInfo* i = node.info(1);
    if (d == nullptr || d->type != nn::ElementType::kFloat)
        return tl::unexpected(node.refuse("its data must be float values of the graph"));
    if (i == nullptr || i->type != nn::ElementType::kInt || i->rank() != d->rank())
        return tl::unexpected(node.refuse("its indices must be integers of the data's rank"));
    const auto rank = static_cast<std::int64_t>(d->rank());
    PSRUN_TRY_ASSIGN(auto given, node.int_attr("axis", 0));
    const std::int64_t axis = given < 0 ? given + rank : given;
    if (axis < 0 || axis >= rank)
        return tl::unexpected(node.refuse("axis " + std::to_string(given) + " is out of range"));
    if (d->dims[static_cast<std::size_t>(axis)].batch)
        return tl::unexpected(node.refuse("it gathers along the batch axis; each example must stay apart"));
    for (std::int64_t a = 0; a < rank; ++a)
        if (a != axis && !(d->dims[static_cast<std::size_t>(a)] == i->dims[static_cast<std::size_t>(a)]))
            return tl::unexpected(node.refuse("its indices are " + nn::to_string(i->dims) + " and its data " +
                                              nn::to_string(d->dims) +
                                              ": they must have the same size on every axis but the gathered one"));
    const std::int64_t classes = d->dims[static_cast<std::size_t>(axis)].value;
    PSRUN_TRY_ASSIGN(auto mask, one_hot_mask(node, indices, rank, classes));
    return OneHot{mask, axis, rank};
}

// The dims of a Gather's table (input 0) when it has no batch axis: a constant's, or a graph
// value's without one; nullopt otherwise.
std::optional<std::vector<std::int64_t>> table_dims(const nn::OnnxNodeImport& node) {
    if (const nn::ValueInfo* t = node.info(0)) {
        if (t->type != nn::ElementType::kFloat) return std::nullopt;
        std::vector<std::int64_t> dims;
        for (const auto& d : t->dims) {
            if (d.batch) return std::nullopt;
            dims.push_back(d.value);
        }
        return dims;
    }
    if (node.element_type(0) != 1) return std::nullopt;  // TensorProto FLOAT: an int table is shape arithmetic's
    return node.constant_shape(0);
}

// The axis' permutation moving it last, or back from last to `axis` (empty: no move needed).
std::vector<std::int64_t> move_axis(std::int64_t axis, std::int64_t rank, bool back) {
    std::vector<std::int64_t> perm;
    if (axis == rank - 1) return perm;
    for (std::int64_t a = 0; a < rank; ++a)
        if (a != axis) perm.push_back(a);
    perm.push_back(axis);
    if (!back) return perm;
    std::vector<std::int64_t> inverse(perm.size());
    for (std::size_t k = 0; k < perm.size(); ++k)
        inverse[static_cast<std::size_t>(perm[k])] = static_cast<std::int64_t>(k);
    return inverse;
}

}  // namespace

Result<void> lower_gather_elements(nn::OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto data, node.value(0));
    PSRUN_TRY_ASSIGN(auto one_hot, one_hot_of_indices(node));
    const auto [mask, axis, rank] = one_hot;
    std::string moved = data;
    if (const auto perm = move_axis(axis, rank, false); !perm.empty()) {
        PSRUN_TRY_ASSIGN(auto t, node.emit({{"kind", "transpose"}, {"inputs", {data}}, {"perm", perm}}));
        moved = t;
    }
    PSRUN_TRY_ASSIGN(auto lifted, node.emit({{"kind", "unsqueeze"}, {"inputs", {moved}}, {"axes", {axis}}}));
    PSRUN_TRY_ASSIGN(auto picked, node.emit({{"kind", "mul"}, {"inputs", {lifted, mask}}}));
    PSRUN_TRY_ASSIGN(auto out, node.emit({{"kind", "reduce_sum"},
                                          {"name", node.node_name()},
                                          {"inputs", {picked}},
                                          {"axes", {rank}},
                                          {"keepdims", false}}));
    node.bind_output(0, out);
    return {};
}

Result<void> lower_scatter_elements(nn::OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto reduction, node.string_attr("reduction", "none"));
    if (reduction != "none" && reduction != "add")
        return tl::unexpected(node.refuse("reduction \"" + reduction + "\": only none and add are supported"));
    PSRUN_TRY_ASSIGN(auto data, node.value(0));
    PSRUN_TRY_ASSIGN(auto updates, node.value(2));
    const nn::ValueInfo* u = node.info(2);
    const nn::ValueInfo* i = node.info(1);
    if (u == nullptr || i == nullptr || u->type != nn::ElementType::kFloat || !(u->dims == i->dims))
        return tl::unexpected(node.refuse("its updates must be floats of the indices' dims"));
    PSRUN_TRY_ASSIGN(auto one_hot, one_hot_of_indices(node));
    const auto [mask, axis, rank] = one_hot;
    // Sums over the K axis of [..., K, ..., C], moved back to data's layout [..., C at axis, ...].
    auto to_data_layout = [&, axis = axis, rank = rank](const std::string& v, const char* kind) -> Result<std::string> {
        PSRUN_TRY_ASSIGN(auto r, node.emit({{"kind", kind}, {"inputs", {v}}, {"axes", {axis}}, {"keepdims", false}}));
        std::string out = r;
        if (const auto perm = move_axis(axis, rank, true); !perm.empty()) {
            PSRUN_TRY_ASSIGN(auto t, node.emit({{"kind", "transpose"}, {"inputs", {out}}, {"perm", perm}}));
            out = t;
        }
        return out;
    };
    PSRUN_TRY_ASSIGN(auto column, node.emit({{"kind", "unsqueeze"}, {"inputs", {updates}}, {"axes", {rank}}}));
    PSRUN_TRY_ASSIGN(auto spread, node.emit({{"kind", "mul"}, {"inputs", {mask, column}}}));
    PSRUN_TRY_ASSIGN(auto put, to_data_layout(spread, "reduce_sum"));
    std::string kept = data;
    if (reduction == "none") {
        PSRUN_TRY_ASSIGN(auto hit, to_data_layout(mask, "reduce_max"));
        PSRUN_TRY_ASSIGN(
            auto one,
            node.emit(
                {{"kind", "constant"}, {"shape", nlohmann::json::array()}, {"type", "float"}, {"values", {1.0f}}}));
        PSRUN_TRY_ASSIGN(auto keep, node.emit({{"kind", "sub"}, {"inputs", {one, hit}}}));
        PSRUN_TRY_ASSIGN(auto masked, node.emit({{"kind", "mul"}, {"inputs", {data, keep}}}));
        kept = masked;
    }
    PSRUN_TRY_ASSIGN(auto out, node.emit({{"kind", "add"}, {"name", node.node_name()}, {"inputs", {kept, put}}}));
    node.bind_output(0, out);
    return {};
}

bool gathers_table_by_ids(const nn::OnnxNodeImport& node) {
    const nn::ValueInfo* ids = node.info(1);
    if (ids == nullptr || ids->type != nn::ElementType::kInt || node.ints(1)) return false;
    const auto dims = table_dims(node);
    if (!dims || dims->empty()) return false;
    // A [V, D] float initializer by ids is an embedding's lookup (the embedding kind).
    return !(dims->size() == 2 && !node.initializer(0).empty());
}

Result<void> lower_gather_by_ids(nn::OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto axis, node.int_attr("axis", 0));
    const auto dims = *table_dims(node);
    const auto table_rank = static_cast<std::int64_t>(dims.size());
    if (axis != 0 && axis != -table_rank)
        return tl::unexpected(node.refuse("ids computed at run time pick entries of a table along its axis 0 only"));
    if (dims[0] > kMaxTableByIds)
        return tl::unexpected(node.refuse("it picks entries of a " + std::to_string(dims[0]) +
                                          "-entry table by ids computed at run time; up to " +
                                          std::to_string(kMaxTableByIds) +
                                          " are read this way (a one-hot product): a larger table of rows is "
                                          "an embedding (nn.Embedding, a [V, D] parameter)"));
    PSRUN_TRY_ASSIGN(auto table, node.value(0));
    PSRUN_TRY_ASSIGN(auto ids, node.value(1));
    const auto ids_rank = static_cast<std::int64_t>(node.info(1)->rank());
    PSRUN_TRY_ASSIGN(auto mask, one_hot_mask(node, ids, ids_rank, dims[0]));  // [ids..., V]
    std::string spread = mask;
    if (table_rank > 1) {
        std::vector<std::int64_t> axes;
        for (std::int64_t a = 1; a < table_rank; ++a) axes.push_back(ids_rank + a);
        PSRUN_TRY_ASSIGN(auto lifted, node.emit({{"kind", "unsqueeze"}, {"inputs", {mask}}, {"axes", axes}}));
        spread = lifted;  // [ids..., V, 1, ...]
    }
    PSRUN_TRY_ASSIGN(auto picked, node.emit({{"kind", "mul"}, {"inputs", {spread, table}}}));
    PSRUN_TRY_ASSIGN(auto out, node.emit({{"kind", "reduce_sum"},
                                          {"name", node.node_name()},
                                          {"inputs", {picked}},
                                          {"axes", {ids_rank}},
                                          {"keepdims", false}}));
    node.bind_output(0, out);
    return {};
}

}  // namespace psrun::onnx_io
