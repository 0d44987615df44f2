#include "workerd/train_flops.h"

namespace psrun::worker {

namespace {

// Multiply-adds per example of a conv2d or dense node's forward: its weight tensor's elements
// times the output positions (conv2d) or once (dense); 0 for other kinds.
double node_macs(const nn::ModelDescription& model, const nn::Node& node) {
    if (node.op != "conv2d" && node.op != "dense") return 0;
    if (node.slots.empty()) return 0;
    const nn::TensorDef* w = model.tensor(node.inputs[node.data_inputs]);
    if (w == nullptr) return 0;  // weights from a graph value (a transpose of a parameter)
    double macs = static_cast<double>(w->size);
    if (node.op == "conv2d" && !node.output_info.empty()) {
        const auto& dims = node.output_info.front().dims;  // N, C, H, W
        if (dims.size() == 4) macs *= static_cast<double>(dims[2].value * dims[3].value);
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
        f.weight_gradient += 2 * macs;
        if (trainable_before) f.data_gradient += 2 * macs;
        trainable_before = trainable_before || node.param_count > 0;
    }
    return f;
}

}  // namespace psrun::worker
