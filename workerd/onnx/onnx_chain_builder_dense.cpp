// ChainBuilder's flat part (onnx_chain_builder.h): Gemm and MatMul(+Add) as dense layers,
// Dropout, and the final Softmax the engine's loss replaces.
#include "workerd/onnx/onnx_chain_builder.h"

namespace psrun::onnx_io {

namespace {

// [rows, cols] -> [cols, rows].
std::vector<float> transposed(const std::vector<float>& m, std::int64_t rows, std::int64_t cols) {
    std::vector<float> out(m.size());
    for (std::int64_t r = 0; r < rows; ++r)
        for (std::int64_t c = 0; c < cols; ++c)
            out[static_cast<std::size_t>(c * rows + r)] = m[static_cast<std::size_t>(r * cols + c)];
    return out;
}

}  // namespace

Result<std::size_t> ChainBuilder::dense(const onnx::NodeProto& node, const onnx::NodeProto* next) {
    const bool gemm = node.op_type() == "Gemm";
    if (!flattened_)
        return tl::unexpected(
            refuse(node, "on a " + shape_.to_string() +
                             " image: flatten it first (Flatten or Reshape to [N, F])"));
    if (node.input_size() < 2) return tl::unexpected(refuse(node, "has no weight input"));
    bool trans_b = false;
    if (gemm) {
        auto alpha = float_attr(node, "alpha", 1.0f);
        auto beta = float_attr(node, "beta", 1.0f);
        auto trans_a = int_attr(node, "transA", 0);
        auto tb = int_attr(node, "transB", 0);
        for (const auto* r : {&trans_a, &tb})
            if (!*r) return tl::unexpected(refuse(node, r->error().message));
        if (!alpha || !beta)
            return tl::unexpected(refuse(node, (!alpha ? alpha : beta).error().message));
        if (*alpha != 1.0f || *beta != 1.0f)
            return tl::unexpected(
                refuse(node, "alpha " + std::to_string(*alpha) + ", beta " + std::to_string(*beta) +
                                 ": the engine's dense computes x W^T + b (alpha = beta = 1)"));
        if (*trans_a != 0)
            return tl::unexpected(refuse(node, "transA=1: the engine's input is [N, F]"));
        trans_b = *tb != 0;
    }
    const auto* wt = graph_.constant(node.input(1));
    if (wt == nullptr)
        return tl::unexpected(
            refuse(node, "weight '" + node.input(1) + "' is a missing initializer"));
    const std::int64_t features = shape_.elements();
    std::vector<std::int64_t> dims(wt->dims().begin(), wt->dims().end());
    if (dims.size() != 2 || dims[trans_b ? 1 : 0] != features || dims[trans_b ? 0 : 1] < 1)
        return tl::unexpected(refuse(node, "weight dims " + ints_text(dims) + " do not take " +
                                               std::to_string(features) + " input features (" +
                                               (trans_b ? "[units, F]" : "[F, units]") + ")"));
    auto w = constant_floats(node, 1);
    if (!w) return tl::unexpected(w.error());
    const std::int64_t units = trans_b ? dims[0] : dims[1];
    ImportedParams params;
    params.w_dims = {units, features};
    params.w = trans_b ? std::move(*w) : transposed(*w, features, units);
    // The bias: Gemm's C, or the constant operand of an Add right after a MatMul.
    std::size_t used = 1;
    const onnx::NodeProto* bias_node = nullptr;
    int bias_input = -1;
    if (gemm && node.input_size() > 2 && !node.input(2).empty()) {
        bias_node = &node;
        bias_input = 2;
    } else if (!gemm && next != nullptr && next->op_type() == "Add" && next->input_size() == 2) {
        const int other = next->input(0) == node.output(0) ? 1 : 0;
        if (next->input(1 - other) == node.output(0) &&
            graph_.constant(next->input(other)) != nullptr) {
            bias_node = next;
            bias_input = other;
            used = 2;
        }
    }
    if (bias_node != nullptr) {
        const auto* bt = graph_.constant(bias_node->input(bias_input));
        if (bt == nullptr)
            return tl::unexpected(refuse(*bias_node, "bias '" + bias_node->input(bias_input) +
                                                         "' is a missing initializer"));
        std::vector<std::int64_t> bdims(bt->dims().begin(), bt->dims().end());
        if (bdims != std::vector<std::int64_t>{units} &&
            bdims != std::vector<std::int64_t>{1, units})
            return tl::unexpected(refuse(
                *bias_node,
                "bias dims " + ints_text(bdims) + " are not [" + std::to_string(units) + "]"));
        auto b = constant_floats(*bias_node, bias_input);
        if (!b) return tl::unexpected(b.error());
        params.b = std::move(*b);
    }
    const bool bias = !params.b.empty();
    push({{"kind", "dense"}, {"units", units}, {"bias", bias}}, node, std::move(params));
    shape_ = nn::ActivationShape{units, 1, 1, true};
    return used;
}

Result<void> ChainBuilder::dropout(const onnx::NodeProto& node) {
    float ratio = 0.5f;
    if (opset_ < 12) {
        auto r = float_attr(node, "ratio", 0.5f);
        if (!r) return tl::unexpected(refuse(node, r.error().message));
        ratio = *r;
    } else if (node.input_size() > 1 && !node.input(1).empty()) {
        const auto* t = graph_.constant(node.input(1));
        if (t == nullptr)
            return tl::unexpected(
                refuse(node, "its ratio '" + node.input(1) + "' is not a constant"));
        auto r = read_floats(*t);
        if (!r || r->size() != 1) return tl::unexpected(refuse(node, "its ratio is not one float"));
        ratio = (*r)[0];
    }
    if (!(ratio >= 0.0f && ratio < 1.0f))
        return tl::unexpected(refuse(node, "ratio " + std::to_string(ratio) + " is not in [0, 1)"));
    if (ratio > 0.0f) push({{"kind", "dropout"}, {"rate", static_cast<double>(ratio)}}, node);
    return {};
}

Result<void> ChainBuilder::final_softmax(const onnx::NodeProto& node) {
    if (node.output(0) != graph_.output())
        return tl::unexpected(
            refuse(node,
                   "only a final Softmax/LogSoftmax is supported (the engine's loss is "
                   "softmax cross-entropy of the logits)"));
    if (!shape_.flat)
        return tl::unexpected(
            refuse(node, "on a " + shape_.to_string() + " input: the engine's logits are flat"));
    auto axis = int_attr(node, "axis", opset_ < 13 ? 1 : -1);
    if (!axis) return tl::unexpected(refuse(node, axis.error().message));
    if (*axis != 1 && *axis != -1)
        return tl::unexpected(
            refuse(node, "axis " + std::to_string(*axis) + ": only over the classes (1 or -1)"));
    return {};
}

}  // namespace psrun::onnx_io
