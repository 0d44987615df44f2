// GatherElements (torch.gather: the log-probability of each label in a focal loss, the value of
// each chosen action in RL) as a one-hot mask and a sum (onnx_lowerings.h). With data of dims
// [..., C at axis, ...] and int indices of the same rank, equal to data's dims but at the axis
// (K there):
//   at   = indices + C * (indices < 0)                                  (negative: from the end)
//   mask = cast(equal(unsqueeze(at, -1), [0, 1, ..., C-1]))            [..., K at axis, ..., C]
//   out  = reduce_sum(unsqueeze(moveaxis(data, axis, -1), axis) * mask, -1)
// so the indices may be computed at run time (the labels), and the gradient reaches each
// gathered entry through the mul. An index outside [-C, C) gathers 0 (no error at run time).
#include <string>
#include <vector>

#include "workerd/onnx/onnx_lowerings.h"

namespace psrun::onnx_io {

Result<void> lower_gather_elements(nn::OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto data, node.value(0));
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
    PSRUN_TRY_ASSIGN(auto mask, node.emit({{"kind", "cast"}, {"inputs", {hit}}, {"to", "float"}}));
    std::string moved = data;
    if (axis != rank - 1) {
        std::vector<std::int64_t> perm;
        for (std::int64_t a = 0; a < rank; ++a)
            if (a != axis) perm.push_back(a);
        perm.push_back(axis);
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

}  // namespace psrun::onnx_io
