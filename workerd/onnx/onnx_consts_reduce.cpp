// Reductions of values known at import (onnx_consts_ops.h: evaluate_reduce): ReduceProd of
// integers or floats (x.std(dim) and x.var(dim) count the reduced elements as
// ReduceProd(Gather(Shape(x), dims)) and divide by count - 1), ReduceSum, ReduceMax and
// ReduceMin of integers (shape arithmetic). An integer may be a multiple of the batch size N: a
// product keeps at most one such factor; a sum, max or min of one is not evaluated.
#include <algorithm>

#include "workerd/onnx/onnx_consts_ops.h"

namespace psrun::onnx_io::consts_detail {

Result<Outputs> evaluate_reduce(const onnx::NodeProto& node, std::int64_t opset, const std::vector<const Known*>& in) {
    const std::string& op = node.op_type();
    const Known& a = *in[0];
    if (op != "ReduceProd" && (a.is_float || (op != "ReduceSum" && op != "ReduceMax" && op != "ReduceMin")))
        return Outputs{};
    // ReduceSum's axes are an input from opset 13, every Reduce*'s from 18.
    const bool axes_input = opset >= 18 || (op == "ReduceSum" && opset >= 13);
    std::vector<std::int64_t> axes;
    if (axes_input) {
        if (in.size() > 1 && in[1] != nullptr) {
            auto v = in[1]->plain_ints();
            if (!v) return tl::unexpected(bad(node, "axes depend on the batch size"));
            axes = *v;
        } else if (node.input_size() > 1 && !node.input(1).empty()) {
            return Outputs{};
        }
    } else {
        PSRUN_TRY_ASSIGN(auto attr, ints_attr(node, "axes"));
        axes = attr.value_or(std::vector<std::int64_t>{});
    }
    auto keep = int_attr(node, "keepdims", 1);
    auto noop = int_attr(node, "noop_with_empty_axes", 0);
    if (!keep || !noop) return tl::unexpected(!keep ? keep.error() : noop.error());
    if (axes.empty() && *noop != 0 && axes_input) return Outputs{{a}};
    const auto rank = static_cast<std::int64_t>(a.dims.size());
    std::vector<bool> reduced(a.dims.size(), axes.empty());
    for (const auto x : axes) {
        const auto d = normalize_axis(x, rank);
        if (d < 0 || d >= rank) return tl::unexpected(bad(node, "axis " + std::to_string(x) + " out of range"));
        reduced[static_cast<std::size_t>(d)] = true;
    }
    std::vector<std::int64_t> out_dims, kept_dims;  // kept_dims: the reduced ones as 1
    for (std::size_t d = 0; d < a.dims.size(); ++d) {
        kept_dims.push_back(reduced[d] ? 1 : a.dims[d]);
        if (!reduced[d] || *keep != 0) out_dims.push_back(kept_dims.back());
    }
    const auto n = product(kept_dims);
    const auto strides = strides_of(a.dims), kept_strides = strides_of(kept_dims);
    std::vector<double> f(static_cast<std::size_t>(n), op == "ReduceProd" ? 1.0 : 0.0);
    std::vector<Dim> i(static_cast<std::size_t>(n), Dim{op == "ReduceProd" ? 1 : 0});
    std::vector<bool> first(static_cast<std::size_t>(n), true);
    const auto total = product(a.dims);
    for (std::int64_t e = 0; e < total; ++e) {
        std::int64_t target = 0, rest = e;
        for (std::size_t d = 0; d < a.dims.size(); ++d) {
            const std::int64_t c = rest / strides[d];
            rest %= strides[d];
            if (!reduced[d]) target += c * kept_strides[d];
        }
        const auto t = static_cast<std::size_t>(target);
        if (a.is_float) {
            f[t] *= a.f[static_cast<std::size_t>(e)];
            continue;
        }
        const Dim x = a.i[static_cast<std::size_t>(e)];
        if (op == "ReduceProd") {
            if (x.batch && i[t].batch) return Outputs{};  // N * N
            i[t] = Dim{wrap_mul(i[t].value, x.value), x.batch || i[t].batch};
            continue;
        }
        if (x.batch) return Outputs{};
        if (op == "ReduceSum") i[t].value = wrap_add(i[t].value, x.value);
        else if (first[t]) i[t].value = x.value;
        else i[t].value = op == "ReduceMax" ? std::max(i[t].value, x.value) : std::min(i[t].value, x.value);
        first[t] = false;
    }
    if (a.is_float) return Outputs{{make_floats(out_dims, f)}};
    return Outputs{{make_ints(out_dims, i)}};
}

}  // namespace psrun::onnx_io::consts_detail
