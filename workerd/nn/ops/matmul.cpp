// Batched matrix product of two values (attention's Q K^T and P V):
//   {"kind": "matmul", "inputs": ["a", "b"]}: a [..., M, K] times b [..., K, P] gives
//   [..., M, P], the leading (batch) dims broadcast as numpy does.
// No fields, no tensors (a parameter layer's output may be either input). Floats, each input of
// rank 2 or more (up to 6); neither the contracted dim K nor a second batch dim in the output
// (a product across examples) is allowed. FLOPs: 2 * K per output element.
// ONNX: MatMul between values (a MatMul whose second input is a weight initializer imports as
// dense, onnx_patterns.cpp; this takes the others; a 1-D operand, numpy's vector, is unsqueezed
// to a matrix and its axis squeezed from the result). Einsum is lowered to matmul and its
// neighbours by einsum_import.cpp (einsum.h), which this schema hands it to.
#include <algorithm>

#include "workerd/nn/onnx_bridge.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/broadcast.h"
#include "workerd/nn/ops/einsum.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

namespace {

Result<void> infer_matmul(InferContext& context) {
    const ValueInfo& a = context.input(0);
    const ValueInfo& b = context.input(1);
    for (std::size_t i = 0; i < 2; ++i) {
        const ValueInfo& v = context.input(i);
        if (v.type != ElementType::kFloat)
            return tl::unexpected(op_error("expects floats; input " + std::to_string(i) + " (" + context.input_name(i) +
                                           ") holds integer ids"));
        if (v.rank() < 2 || v.rank() > 6)
            return tl::unexpected(op_error("input " + std::to_string(i) + " (" + context.input_name(i) + ") is " +
                                           to_string(v.dims) + "; matmul needs 2 to 6 dims (matrices, batched)"));
    }
    const Dim k = a.dims.back(), k2 = b.dims[b.rank() - 2];
    const std::string shapes = to_string(a.dims) + " and " + to_string(b.dims);
    if (k != k2)
        return tl::unexpected(op_error("inner dims differ: " + shapes + " (the last dim of the first must be the " +
                                       "second-last of the second)"));
    if (k.batch) return tl::unexpected(op_error(shapes + " contract over the batch dim; each example must stay apart"));
    auto batch = broadcast_dims(Dims(a.dims.begin(), a.dims.end() - 2), Dims(b.dims.begin(), b.dims.end() - 2));
    if (!batch) return tl::unexpected(op_error("the leading dims of " + shapes + " do not broadcast"));
    Dims out = *batch;
    out.push_back(a.dims[a.rank() - 2]);
    out.push_back(b.dims.back());
    int batch_dims = 0;
    for (const auto& d : out) batch_dims += d.batch ? 1 : 0;
    if (batch_dims > 1)
        return tl::unexpected(op_error(shapes + " give " + to_string(out) + ": the batch would meet itself (products " +
                                       "across examples); each example must stay apart"));
    context.set_output(0, ValueInfo{out, ElementType::kFloat});
    context.add_flops(2.0 * static_cast<double>(k.value) * static_cast<double>(elements_per_example(out).value_or(0)));
    return {};
}

Result<void> import_matmul(OnnxNodeImport& node) {
    if (node.op_type() == "Einsum") return import_einsum(node);
    PSRUN_TRY_ASSIGN(auto a, node.value(0));
    PSRUN_TRY_ASSIGN(auto b, node.value(1));
    // numpy's vectors (x @ v with v [K]): a 1-D operand (not a batch of scalars) is a matrix of
    // one row (a) or one column (b) for the matmul, and that axis is squeezed from the result.
    auto vector = [&node](std::size_t i) {
        const ValueInfo* v = node.info(i);
        return v != nullptr && v->rank() == 1 && !v->dims[0].batch;
    };
    const bool a_vector = vector(0), b_vector = vector(1);
    if (a_vector) {
        PSRUN_TRY_ASSIGN(auto row, node.emit({{"kind", "unsqueeze"}, {"inputs", {a}}, {"axes", {0}}}));
        a = row;
    }
    if (b_vector) {
        PSRUN_TRY_ASSIGN(auto column, node.emit({{"kind", "unsqueeze"}, {"inputs", {b}}, {"axes", {1}}}));
        b = column;
    }
    PSRUN_TRY_ASSIGN(auto name, node.emit({{"kind", "matmul"}, {"inputs", {a, b}}}));
    if (b_vector) {
        PSRUN_TRY_ASSIGN(auto squeezed, node.emit({{"kind", "squeeze"}, {"inputs", {name}}, {"axes", {-1}}}));
        name = squeezed;
    }
    if (a_vector) {
        PSRUN_TRY_ASSIGN(auto squeezed,
                         node.emit({{"kind", "squeeze"}, {"inputs", {name}}, {"axes", {b_vector ? -1 : -2}}}));
        name = squeezed;
    }
    node.bind_output(0, name);
    return {};
}

Result<void> export_matmul(OnnxNodeExport& out) {
    out.add("MatMul", {out.input(0), out.input(1)}, {out.output(0)}, {}, out.node().name);
    return {};
}

// The output's elements times the inner dim; no weights, so no weight gradient, and a data
// gradient of the same work for each input that needs one.
TrainingMacs matmul_macs(const MacsContext& c) {
    const auto& a = c.model.value(c.node.inputs.front()).dims;
    if (a.empty()) return {};
    const double macs =
        MacsContext::per_example(c.node.output_info.front().dims, false) * static_cast<double>(a.back().value);
    const auto grads = std::count(c.input_needs_grad.begin(), c.input_needs_grad.end(), true);
    return {macs, 0, static_cast<double>(grads) * macs};
}

}  // namespace

const OpSchema& matmul_schema() {
    static const OpSchema s{
        "matmul",      2,    2,          parse_no_attributes, infer_matmul, {"MatMul", "Einsum"}, import_matmul,
        export_matmul, true, matmul_macs};
    return s;
}

}  // namespace psrun::nn
