#include "workerd/train_flops.h"

namespace psrun::worker {

TrainingFlops training_flops(const nn::ModelDescription& model) {
    TrainingFlops f;
    bool trainable_before = false;  // a layer before this one has parameters
    for (const nn::LayerSpec& layer : model.layers) {
        double macs = 0;  // multiply-adds per example, forward
        if (!layer.params.empty()) {
            const double weights = static_cast<double>(layer.params.front().size);
            if (layer.kind == nn::LayerKind::kConv2d)
                macs = weights * static_cast<double>(layer.output.height * layer.output.width);
            else if (layer.kind == nn::LayerKind::kDense)
                macs = weights;
        }
        f.forward += 2 * macs;
        f.weight_gradient += 2 * macs;
        if (trainable_before) f.data_gradient += 2 * macs;
        trainable_before = trainable_before || !layer.params.empty();
    }
    return f;
}

}  // namespace psrun::worker
