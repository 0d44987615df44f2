#include "workerd/train_flops.h"

namespace psrun::worker {

namespace {

// Elements per example of `dims` (a batch axis kN counts k), the last dim left out when `but_last`.
double per_example(const nn::Dims& dims, bool but_last) {
    double n = 1;
    for (std::size_t i = 0; i + (but_last ? 1 : 0) < dims.size(); ++i) n *= static_cast<double>(dims[i].value);
    return n;
}

// Multiply-adds per example of a conv2d, conv_transpose, dense, matmul, lstm or gru node's
// forward: a weight tensor's elements times the output positions (conv2d: H x W or L;
// conv_transpose: the input's positions; dense: every position before the
// last dim, 1 after an image, L on N x L x F), a matmul's output elements times its inner dim,
// or a recurrent layer's input and recurrent weights times its steps; 0 for other kinds.
double node_macs(const nn::ModelDescription& model, const nn::Node& node) {
    if (node.output_info.empty()) return 0;
    const auto& out = node.output_info.front().dims;
    if (node.op == "matmul") {
        const auto& a = model.value(node.inputs.front()).dims;
        return a.empty() ? 0 : per_example(out, false) * static_cast<double>(a.back().value);
    }
    if (node.op == "lstm" || node.op == "gru") {
        // Per time step, every input and recurrent weight once (the biases are adds): W and R,
        // or w_ih and w_hh (and their _reverse), times the sequence length.
        double weights = 0;
        for (std::size_t k = 0; k < node.slots.size(); ++k) {
            const nn::TensorDef* t = model.tensor(node.inputs[node.data_inputs + k]);
            if (t != nullptr && node.slots[k][0] != 'b' && node.slots[k][0] != 'B') weights += static_cast<double>(t->size);
        }
        const bool batch_first = node.attrs.value("batch_first", false);
        return out.size() < 2 ? 0 : weights * static_cast<double>(out[batch_first ? 1 : 0].value);
    }
    if (node.op != "conv2d" && node.op != "dense" && node.op != "conv_transpose") return 0;
    if (node.slots.empty()) return 0;
    const nn::TensorDef* w = model.tensor(node.inputs[node.data_inputs]);
    if (w == nullptr) return 0;  // weights from a graph value (a transpose of a parameter)
    double macs = static_cast<double>(w->size);
    if (node.op == "conv2d") {
        if (out.size() == 4) macs *= static_cast<double>(out[2].value * out[3].value);  // N, C, H, W
        if (out.size() == 3) macs *= static_cast<double>(out[2].value);                 // N, C, L (1-D)
    } else if (node.op == "conv_transpose") {  // every weight once per input position
        const auto& in = model.value(node.inputs.front()).dims;
        macs *= per_example(in, false) / static_cast<double>(in.size() > 1 ? in[1].value : 1);
    } else {
        macs *= per_example(out, true);
    }
    return macs;
}

}  // namespace

TrainingFlops training_flops(const nn::ModelDescription& model) {
    TrainingFlops f;
    bool trainable_before = false;  // a node before this one (in graph order) has parameters
    for (const nn::Node& node : model.nodes) {
        const double macs = node_macs(model, node);
        f.forward += 2 * macs;
        if (node.op == "matmul") {  // no weights: a gradient for each of its two inputs
            if (trainable_before) f.data_gradient += 2 * 2 * macs;
        } else {
            f.weight_gradient += 2 * macs;
            if (trainable_before) f.data_gradient += 2 * macs;
        }
        trainable_before = trainable_before || node.param_count > 0;
    }
    return f;
}

}  // namespace psrun::worker
