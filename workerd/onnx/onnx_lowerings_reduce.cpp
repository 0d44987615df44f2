// The Reduce* ops that are a reduce_sum (or reduce_max) around element-wise kinds
// (onnx_lowerings.h):
//   ReduceL1(x) = reduce_sum(abs(x)), ReduceSumSquare(x) = reduce_sum(x * x),
//   ReduceL2(x) = sqrt(reduce_sum(x * x)) (F.normalize's norm),
//   ReduceLogSumExp(x) = log(reduce_sum(exp(x - m))) + m, m = reduce_max(x) kept over the axes:
//     no overflow, and the gradient is exact (it does not depend on m's).
// Axes: the `axes` attribute before opset 18, a constant input from 18 (noop_with_empty_axes);
// absent: every axis, the batch's included (a loss). keepdims default 1.
#include <string>
#include <vector>

#include "workerd/nn/ops/reduce.h"
#include "workerd/onnx/onnx_lowerings.h"

namespace psrun::onnx_io {

namespace {

struct ReduceNormAxes {
    std::vector<std::int64_t> axes;
    bool keep = true;
};

Result<ReduceNormAxes> reduce_norm_axes(nn::OnnxNodeImport& node, const nn::ValueInfo& info) {
    PSRUN_TRY_ASSIGN(auto read, nn::read_onnx_reduce_axes(node, node.opset() >= 18));
    ReduceNormAxes r{std::move(read.axes), read.keepdims};
    if (r.axes.empty() && read.noop_if_empty)
        return tl::unexpected(
            node.refuse("noop_with_empty_axes=1 without axes leaves nothing to reduce; give the axes"));
    if (r.axes.empty())
        for (std::size_t d = 0; d < info.rank(); ++d) r.axes.push_back(static_cast<std::int64_t>(d));
    return r;
}

}  // namespace

Result<void> lower_reduce_norm(nn::OnnxNodeImport& node) {
    PSRUN_TRY_ASSIGN(auto x, node.value(0));
    const nn::ValueInfo* info = node.info(0);
    if (info == nullptr || info->type != nn::ElementType::kFloat)
        return tl::unexpected(node.refuse("expects a float graph value (not a constant, not integers)"));
    auto r = reduce_norm_axes(node, *info);
    if (!r) return tl::unexpected(r.error());
    const std::string op(node.op_type());
    auto layer = [&node](const char* kind, std::vector<std::string> inputs) {
        return node.emit({{"kind", kind}, {"inputs", std::move(inputs)}});
    };
    auto reduce = [&node, &r](const char* kind, const std::string& v, bool keep) {
        return node.emit({{"kind", kind}, {"inputs", {v}}, {"axes", r->axes}, {"keepdims", keep}});
    };
    Result<std::string> out;
    if (op == "ReduceL1") {
        PSRUN_TRY_ASSIGN(auto a, layer("abs", {x}));
        out = reduce("reduce_sum", a, r->keep);
    } else if (op == "ReduceL2" || op == "ReduceSumSquare") {
        PSRUN_TRY_ASSIGN(auto sq, layer("mul", {x, x}));
        out = reduce("reduce_sum", sq, r->keep);
        if (out && op == "ReduceL2") out = layer("sqrt", {*out});
    } else {  // ReduceLogSumExp
        auto m = reduce("reduce_max", x, true);
        if (!m) return tl::unexpected(m.error());
        PSRUN_TRY_ASSIGN(auto shifted, layer("sub", {x, *m}));
        PSRUN_TRY_ASSIGN(auto e, layer("exp", {shifted}));
        PSRUN_TRY_ASSIGN(auto s, reduce("reduce_sum", e, r->keep));
        PSRUN_TRY_ASSIGN(auto l, layer("log", {s}));
        PSRUN_TRY_ASSIGN(auto mk, r->keep ? m : reduce("reduce_max", x, false));
        out = layer("add", {l, mk});
    }
    if (!out) return tl::unexpected(out.error());
    node.bind_output(0, *out);
    return {};
}

}  // namespace psrun::onnx_io
