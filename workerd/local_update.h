// The standalone worker's update of its whole parameter buffer (Trainer::apply_gradients): the
// optimizer on trainable tensors, params -= grads on state tensors (common/tensor_layout.h
// TensorClass), exactly as psd applies them, with each tensor's learning-rate multiplier and weight
// decay (OptimizerConfig::for_tensor: --param-group, else decays() by rank). The buffer is cut into `chunks` contiguous chunks
// updated in parallel (OpenMP); each chunk keeps its own optimizer slots, so the result equals
// one optimizer over the whole buffer. Not thread-safe: one caller at a time.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

#include "common/optimizer.h"
#include "workerd/parameter_set.h"

namespace psrun::worker {

class LocalUpdate {
public:
    // `tensors` in buffer order, packed without gaps; chunks >= 1.
    LocalUpdate(const OptimizerConfig& config, const std::vector<TensorInfo>& tensors, int chunks);

    // One update. REQUIRES: params.size() == grads.size() == the tensors' total.
    void apply(std::span<float> params, std::span<const float> grads);

private:
    struct Run {  // a piece of one chunk, chunk-relative, of one class and one resolved configuration
        std::size_t begin = 0, end = 0;
        bool state = false;
        OptimizerConfig tensor;  // trainable: config.for_tensor(its tensor)
    };
    std::vector<Optimizer> optimizers_;     // one per chunk
    std::vector<std::size_t> chunk_begin_;  // optimizers_.size() + 1 offsets
    std::vector<std::vector<Run>> runs_;    // per chunk
};

}  // namespace psrun::worker
