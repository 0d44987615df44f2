// ONNX operators with no kind of their own, imported as a few layers of existing kinds
// (onnx_importer.h: import_lowering). Each lowering reads the op's attributes as its opset
// defines them and refuses, naming the node, what it cannot express:
//   DepthToSpace (DCR, and CRD from opset 11) and SpaceToDepth: reshape, transpose, reshape;
//   Tile with constant repeats: a concat of copies per repeated axis (never the batch axis);
//   Celu(alpha): alpha * elu(x / alpha) (elu alone for alpha 1);
//   OneHot of integer indices (F.one_hot(ids, depth).float()) with a constant depth and values:
//     unsqueeze at the axis, equal to a constant 0..depth-1, cast to float, and off + (on - off)
//     times that where the values are not 0 and 1 (a negative index, which ONNX counts from
//     the end, matches nothing: its row is all off);
//   ReduceL1, ReduceL2, ReduceSumSquare, ReduceLogSumExp (onnx_lowerings_reduce.cpp);
//   Sum and Mean of one or more inputs: a chain of adds (Mean's times 1 / n);
//   And, Or, Xor of masks (torch.nan_to_num, `m1 & m2`): mul, not(equal(a + b, 0)) and
//     not(equal(a, b)) of the integer 0/1 masks the comparisons make.
// (ArgMax, ArgMin and TopK are the top_k kind's, ops/top_k.cpp.)
#include <string>
#include <vector>

#include "workerd/onnx/onnx_lowerings.h"

namespace psrun::onnx_io {

using nn::OnnxNodeImport;

namespace {

// The node's first input as a float value of known rank.
Result<std::pair<std::string, const nn::ValueInfo*>> lowering_input(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const nn::ValueInfo* info = node.info(0);
    if (info == nullptr)
        return tl::unexpected(node.refuse("its input is a constant; the engine lowers it only on a graph value"));
    if (info->type != nn::ElementType::kFloat)
        return tl::unexpected(node.refuse("its input holds integers; floats only"));
    return std::pair{x, info};
}

nlohmann::json dims_json(const std::vector<std::int64_t>& fixed) {
    nlohmann::json shape = nlohmann::json::array({"N"});
    for (const auto d : fixed) shape.push_back(d);
    return shape;
}

Result<void> lower_depth_space(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto in, lowering_input(node));
    const auto& [x, info] = in;
    const bool to_space = node.op_type() == "DepthToSpace";
    PSRUN_TRY_ASSIGN(auto b, node.int_attr("blocksize", 0));
    std::string mode = "DCR";
    if (to_space && node.opset() >= 11) {
        PSRUN_TRY_ASSIGN(auto m, node.string_attr("mode", "DCR"));
        mode = m;
    }
    if (mode != "DCR" && mode != "CRD")
        return tl::unexpected(node.refuse("mode '" + mode + "' is none of DCR and CRD"));
    if (info->rank() != 4 || !info->dims[0].batch || info->dims[0].value != 1)
        return tl::unexpected(node.refuse("expects an image batch [N, C, H, W], got " + nn::to_string(info->dims)));
    const std::int64_t c = info->dims[1].value, h = info->dims[2].value, w = info->dims[3].value, k = b;
    if (k < 1 || k > 4096)
        return tl::unexpected(node.refuse("blocksize " + std::to_string(k) + " is not in [1, 4096]"));
    std::vector<std::int64_t> split, merged;
    std::vector<std::int64_t> perm;
    if (to_space) {
        if (c % (k * k) != 0)
            return tl::unexpected(node.refuse("the channels (" + std::to_string(c) +
                                              ") are no multiple of blocksize^2 (" + std::to_string(k * k) + ")"));
        const std::int64_t oc = c / (k * k);
        split = mode == "DCR" ? std::vector<std::int64_t>{k, k, oc, h, w} : std::vector<std::int64_t>{oc, k, k, h, w};
        perm =
            mode == "DCR" ? std::vector<std::int64_t>{0, 3, 4, 1, 5, 2} : std::vector<std::int64_t>{0, 1, 4, 2, 5, 3};
        merged = {oc, h * k, w * k};
    } else {
        if (h % k != 0 || w % k != 0)
            return tl::unexpected(node.refuse("height " + std::to_string(h) + " and width " + std::to_string(w) +
                                              " must be multiples of blocksize " + std::to_string(k)));
        split = {c, h / k, k, w / k, k};
        perm = {0, 3, 5, 1, 2, 4};
        merged = {c * k * k, h / k, w / k};
    }
    PSRUN_TRY_ASSIGN(auto r1, node.emit({{"kind", "reshape"}, {"inputs", {x}}, {"shape", dims_json(split)}}));
    PSRUN_TRY_ASSIGN(auto t, node.emit({{"kind", "transpose"}, {"inputs", {r1}}, {"perm", perm}}));
    PSRUN_TRY_ASSIGN(auto r2, node.emit({{"kind", "reshape"}, {"inputs", {t}}, {"shape", dims_json(merged)}}));
    node.bind_output(0, r2);
    return {};
}

// Tile: concat of r copies per axis; a repeat of k times the batch size (`p.repeat(x.shape[0], 1,
// 1)`: a class token or a learned query per example) on an axis of size 1, an expand to kN there.
Result<void> lower_tile(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto in, lowering_input(node));
    const auto& [x, info] = in;
    const auto symbolic = node.symbolic_ints(1);
    if (!symbolic)
        return tl::unexpected(node.refuse("its repeats are computed at run time; the engine needs them at import"));
    if (symbolic->size() != info->rank())
        return tl::unexpected(node.refuse(std::to_string(symbolic->size()) + " repeats for an input of rank " +
                                          std::to_string(info->rank())));
    std::string value = x;
    std::vector<std::int64_t> constant(symbolic->size(), 1);
    nlohmann::json shape = nlohmann::json::array();
    bool by_batch = false;
    for (std::size_t d = 0; d < symbolic->size(); ++d) {
        const nn::Dim& r = (*symbolic)[d];
        if (!r.batch) {
            constant[d] = r.value;
            shape.push_back(1);
            continue;
        }
        if (info->dims[d].batch || info->dims[d].value != 1 || r.value < 1)
            return tl::unexpected(node.refuse("it repeats axis " + std::to_string(d) + " (of size " +
                                              info->dims[d].to_string() + ") " + r.to_string() +
                                              " times; by the batch size, only an axis of size 1 can be"));
        shape.push_back(r.to_string());
        by_batch = true;
    }
    if (by_batch) {
        PSRUN_TRY_ASSIGN(value, node.emit({{"kind", "expand"}, {"inputs", {value}}, {"shape", shape}}));
    }
    const auto* repeats = &constant;
    std::int64_t elements = nn::elements_per_example(info->dims).value_or(1);
    for (std::size_t d = 0; d < repeats->size(); ++d) {
        const std::int64_t r = (*repeats)[d];
        if (r < 1)
            return tl::unexpected(
                node.refuse("repeat " + std::to_string(r) + " on axis " + std::to_string(d) + " is not positive"));
        if (r == 1) continue;
        if (info->dims[d].batch)
            return tl::unexpected(node.refuse("it repeats the batch axis " + std::to_string(r) +
                                              " times; each example must stay apart (repeat the other axes only)"));
        if (r > 4096 || elements > (std::int64_t{1} << 26) / r)
            return tl::unexpected(node.refuse("repeats " + std::to_string(r) + " on axis " + std::to_string(d) +
                                              " make over 2^26 elements per example"));
        elements *= r;
        PSRUN_TRY_ASSIGN(auto cat, node.emit({{"kind", "concat"},
                                              {"inputs", std::vector<std::string>(static_cast<std::size_t>(r), value)},
                                              {"axis", static_cast<std::int64_t>(d)}}));
        value = cat;
    }
    node.bind_output(0, value);
    return {};
}

Result<void> lower_celu(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto in, lowering_input(node));
    const std::string x = in.first;
    PSRUN_TRY_ASSIGN(auto alpha, node.float_attr("alpha", 1.0f));
    if (!(alpha > 0.0f)) return tl::unexpected(node.refuse("alpha " + std::to_string(alpha) + " is not positive"));
    if (alpha == 1.0f) {
        PSRUN_TRY_ASSIGN(auto elu, node.emit({{"kind", "elu"}, {"inputs", {x}}, {"alpha", 1.0}}));
        node.bind_output(0, elu);
        return {};
    }
    auto scale = [&node](const std::string& v, float k) -> Result<std::string> {
        auto c = node.emit({{"kind", "constant"}, {"shape", {1}}, {"type", "float"}, {"values", {k}}});
        if (!c) return c;
        return node.emit({{"kind", "mul"}, {"inputs", {v, *c}}});
    };
    PSRUN_TRY_ASSIGN(auto inner, scale(x, 1.0f / alpha));
    PSRUN_TRY_ASSIGN(auto elu, node.emit({{"kind", "elu"}, {"inputs", {inner}}, {"alpha", 1.0}}));
    PSRUN_TRY_ASSIGN(auto out, scale(elu, alpha));
    node.bind_output(0, out);
    return {};
}

Result<void> lower_one_hot(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto ids, node.value(0));
    const nn::ValueInfo* info = node.info(0);
    if (info == nullptr || info->type != nn::ElementType::kInt)
        return tl::unexpected(node.refuse("its indices must be integer values of the graph"));
    const auto depth = node.ints(1);
    if (!depth || depth->size() != 1 || (*depth)[0] < 1 || (*depth)[0] > 65536)
        return tl::unexpected(node.refuse("its depth must be a constant from 1 to 65536 (known at import)"));
    const auto values = node.floats(2);
    if (!values || values->size() != 2) return tl::unexpected(node.refuse("its values must be a constant [off, on]"));
    const auto rank = static_cast<std::int64_t>(info->rank()) + 1;
    PSRUN_TRY_ASSIGN(auto given, node.int_attr("axis", -1));
    const std::int64_t axis = given < 0 ? given + rank : given;
    if (axis < 1 || axis >= rank)
        return tl::unexpected(node.refuse("axis " + std::to_string(given) + " must be an axis of each example"));
    const std::int64_t n = (*depth)[0];
    // The classes 0..n-1 along `axis`: shape [n, 1, ...] aligned with the output's trailing axes.
    std::vector<std::int64_t> shape{n}, classes;
    for (std::int64_t d = axis + 1; d < rank; ++d) shape.push_back(1);
    for (std::int64_t k = 0; k < n; ++k) classes.push_back(k);
    PSRUN_TRY_ASSIGN(auto range,
                     node.emit({{"kind", "constant"}, {"shape", shape}, {"type", "int"}, {"values", classes}}));
    PSRUN_TRY_ASSIGN(auto wide, node.emit({{"kind", "unsqueeze"}, {"inputs", {ids}}, {"axes", {axis}}}));
    PSRUN_TRY_ASSIGN(auto hit, node.emit({{"kind", "equal"}, {"inputs", {wide, range}}}));
    PSRUN_TRY_ASSIGN(auto out, node.emit({{"kind", "cast"}, {"inputs", {hit}}, {"to", "float"}}));
    const float off = (*values)[0], on = (*values)[1];
    if (on != 1.0f || off != 0.0f) {
        auto constant = [&node](float v) {
            return node.emit(
                {{"kind", "constant"}, {"shape", nlohmann::json::array()}, {"type", "float"}, {"values", {v}}});
        };
        PSRUN_TRY_ASSIGN(auto scale, constant(on - off));
        PSRUN_TRY_ASSIGN(auto scaled, node.emit({{"kind", "mul"}, {"inputs", {out, scale}}}));
        PSRUN_TRY_ASSIGN(auto base, constant(off));
        PSRUN_TRY_ASSIGN(auto shifted, node.emit({{"kind", "add"}, {"inputs", {scaled, base}}}));
        out = shifted;
    }
    node.bind_output(0, out);
    return {};
}

// And, Or, Xor of two masks (integer 0/1 values, as equal/less/greater/not make them).
Result<void> lower_logical(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto a, node.value(0));
    PSRUN_TRY_ASSIGN(auto b, node.value(1));
    for (std::size_t i = 0; i < 2; ++i)
        if (const nn::ValueInfo* v = node.info(i); v != nullptr && v->type != nn::ElementType::kInt)
            return tl::unexpected(node.refuse("input " + std::to_string(i) + " must be a mask (bool), not floats"));
    const std::string op(node.op_type());
    std::string out;
    if (op == "And") {
        PSRUN_TRY_ASSIGN(out, node.emit({{"kind", "mul"}, {"inputs", {a, b}}}));
    } else {
        std::string same = a;
        if (op == "Or") {
            PSRUN_TRY_ASSIGN(auto sum, node.emit({{"kind", "add"}, {"inputs", {a, b}}}));
            PSRUN_TRY_ASSIGN(
                auto zero,
                node.emit(
                    {{"kind", "constant"}, {"shape", nlohmann::json::array()}, {"type", "int"}, {"values", {0}}}));
            PSRUN_TRY_ASSIGN(same, node.emit({{"kind", "equal"}, {"inputs", {sum, zero}}}));
        } else {
            PSRUN_TRY_ASSIGN(same, node.emit({{"kind", "equal"}, {"inputs", {a, b}}}));
        }
        PSRUN_TRY_ASSIGN(out, node.emit({{"kind", "not"}, {"inputs", {same}}}));
    }
    node.bind_output(0, out);
    return {};
}

// Trilu of a graph value (torch.tril/triu of activations, or of a trainable matrix: a MADE mask, a
// triangular factor; of a known tensor, a causal mask built in forward(), it is evaluated at
// import): where(mask, x, 0) with the [rows, cols] mask constant, so the dropped entries get no
// gradient.
Result<void> lower_trilu(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const nn::ValueInfo* info = node.info(0);
    if (info == nullptr || info->type != nn::ElementType::kFloat || info->rank() < 2)
        return tl::unexpected(node.refuse("its input must be float values with 2 or more axes"));
    const auto& rows = info->dims[info->rank() - 2];
    const auto& cols = info->dims[info->rank() - 1];
    if (rows.batch || cols.batch || rows.value * cols.value > nn::kMaxTensorElements)
        return tl::unexpected(node.refuse("its last two axes must be fixed sizes"));
    std::int64_t k = 0;
    if (node.has_input(1)) {
        const auto given = node.ints(1);
        if (!given || given->size() != 1) return tl::unexpected(node.refuse("k must be a constant integer"));
        k = (*given)[0];
    }
    PSRUN_TRY_ASSIGN(auto upper, node.int_attr("upper", 1));
    std::vector<std::int64_t> mask;
    for (std::int64_t r = 0; r < rows.value; ++r)
        for (std::int64_t c = 0; c < cols.value; ++c) mask.push_back(upper != 0 ? c - r >= k : c - r <= k);
    PSRUN_TRY_ASSIGN(
        auto keep,
        node.emit({{"kind", "constant"}, {"shape", {rows.value, cols.value}}, {"type", "int"}, {"values", mask}}));
    PSRUN_TRY_ASSIGN(
        auto zero,
        node.emit({{"kind", "constant"}, {"shape", nlohmann::json::array()}, {"type", "float"}, {"values", {0.0f}}}));
    PSRUN_TRY_ASSIGN(auto out, node.emit({{"kind", "where"}, {"inputs", {keep, x, zero}}}));
    node.bind_output(0, out);
    return {};
}

// Sum and Mean of one or more inputs, broadcasting: a chain of adds, Mean's then times 1/n.
Result<void> lower_sum_mean(OnnxNodeImport& node) {
    const std::size_t count = node.input_count();
    PSRUN_TRY_ASSIGN(auto total, node.emit_chain("add"));
    if (node.op_type() == "Mean" && count > 1) {
        const float share = 1.0f / static_cast<float>(count);
        PSRUN_TRY_ASSIGN(
            auto scale,
            node.emit(
                {{"kind", "constant"}, {"shape", nlohmann::json::array()}, {"type", "float"}, {"values", {share}}}));
        PSRUN_TRY_ASSIGN(total, node.emit({{"kind", "mul"}, {"inputs", {total, scale}}}));
    }
    node.bind_output(0, total);
    return {};
}

// GreaterOrEqual and LessOrEqual (opset 12+: torch's `x >= t`, `x <= t`) as not(a < b) and
// not(a > b): the same but where a or b is NaN (then true here, false in ONNX).
Result<void> lower_or_equal(OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto a, node.value(0));
    PSRUN_TRY_ASSIGN(auto b, node.value(1));
    const bool greater_or_equal = node.op_type() == "GreaterOrEqual";
    PSRUN_TRY_ASSIGN(auto strict, node.emit({{"kind", greater_or_equal ? "less" : "greater"}, {"inputs", {a, b}}}));
    PSRUN_TRY_ASSIGN(auto out, node.emit({{"kind", "not"}, {"name", node.node_name()}, {"inputs", {strict}}}));
    node.bind_output(0, out);
    return {};
}

struct Lowering {
    std::string_view op;
    Result<void> (*lower)(OnnxNodeImport&);
    // When set, the node is lowered only where it says so (else the op's kind imports it).
    bool (*applies)(const OnnxNodeImport&) = nullptr;
};

const std::vector<Lowering>& lowerings() {
    static const std::vector<Lowering> table = {
        {"DepthToSpace", lower_depth_space},
        {"SpaceToDepth", lower_depth_space},
        {"Tile", lower_tile},
        {"Celu", lower_celu},
        {"OneHot", lower_one_hot},
        {"Trilu", lower_trilu},
        {"And", lower_logical},
        {"Or", lower_logical},
        {"Xor", lower_logical},
        {"GreaterOrEqual", lower_or_equal},
        {"LessOrEqual", lower_or_equal},
        {"GatherElements", lower_gather_elements},
        {"ScatterElements", lower_scatter_elements},
        {"Gather", lower_gather_by_ids, gathers_table_by_ids},
        {"ReduceL1", lower_reduce_norm},
        {"ReduceL2", lower_reduce_norm},
        {"ReduceSumSquare", lower_reduce_norm},
        {"ReduceLogSumExp", lower_reduce_norm},
        {"Sum", lower_sum_mean},
        {"Mean", lower_sum_mean},
    };
    return table;
}

}  // namespace

std::vector<std::string_view> lowered_onnx_ops() {
    std::vector<std::string_view> ops;
    for (const auto& l : lowerings()) ops.push_back(l.op);
    return ops;
}

Result<bool> import_lowering(Importer& importer, int i) {
    const std::string& op = importer.graph().graph().node(i).op_type();
    for (const auto& l : lowerings()) {
        if (l.op != op) continue;
        NodeView view(importer, i);
        if (l.applies != nullptr && !l.applies(view)) continue;
        PSRUN_TRY(l.lower(view));
        return true;
    }
    return false;
}

}  // namespace psrun::onnx_io
