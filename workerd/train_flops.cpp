#include "workerd/train_flops.h"

#include <set>
#include <string>

#include "workerd/nn/op_schema.h"

namespace psrun::worker {

TrainingFlops training_flops(const nn::ModelDescription& model) {
    TrainingFlops f;
    // Values that depend on a trainable tensor: the gradient reaches them, so a kernel reading
    // one computes a data gradient (the engine's rule; it also requires the loss to read it).
    std::set<std::string, std::less<>> trained;
    for (const nn::Node& node : model.nodes) {
        nn::MacsContext context{model, node, {}};
        bool depends = false;
        for (std::size_t i = 0; i < node.inputs.size(); ++i) {
            const std::string& name = node.inputs[i];
            const nn::TensorDef* t = model.tensor(name);
            const bool grad = t != nullptr ? t->cls == nn::TensorClass::kTrainable : trained.count(name) > 0;
            if (i < node.data_inputs) context.input_needs_grad.push_back(grad);
            depends = depends || grad;
        }
        if (depends) trained.insert(node.outputs.begin(), node.outputs.end());
        const nn::OpSchema* schema = nn::find_op(node.op);
        if (schema == nullptr || schema->training_macs == nullptr || node.output_info.empty()) continue;
        const nn::TrainingMacs macs = schema->training_macs(context);
        f.forward += 2 * macs.forward;
        f.weight_gradient += 2 * macs.weight_gradient;
        f.data_gradient += 2 * macs.data_gradient;
    }
    return f;
}

}  // namespace psrun::worker
