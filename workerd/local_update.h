// The standalone worker's update of its whole parameter buffer (Trainer::apply_gradients): the
// optimizer on trainable tensors, params -= grads on state tensors (common/tensor_layout.h
// TensorClass), exactly as psd applies them, with each tensor's learning-rate multiplier and weight
// decay (OptimizerConfig::for_tensor: --param-group, else decays() by rank). The buffer is cut into `chunks` contiguous
// chunks updated in parallel (OpenMP); each chunk keeps its own optimizer slots, so the result equals one optimizer
// over the whole buffer. kLamb, whose trust ratio needs each whole tensor's norms, keeps one optimizer per tensor
// instead and runs its two phases (common/lamb.h) over the tensors' blocks in parallel: exact per tensor, bit for bit
// the same for any `chunks`. Not thread-safe: one caller at a time.
#pragma once

#include <cstddef>
#include <optional>
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
    struct LambTensor {  // kLamb: one tensor and, trainable, its optimizer (config.for_tensor)
        std::size_t offset = 0, size = 0;
        bool state = false, decay = false;
        std::optional<Optimizer> optimizer;  // none for a state tensor
    };
    struct LambBlock {  // kLamb's unit of parallel work: [begin, end) of tensor `tensor`, tensor-relative
        std::size_t tensor = 0, begin = 0, end = 0;
    };
    void apply_lamb(std::span<float> params, std::span<const float> grads);

    std::vector<Optimizer> optimizers_;     // one per chunk
    std::vector<std::size_t> chunk_begin_;  // optimizers_.size() + 1 offsets
    std::vector<std::vector<Run>> runs_;    // per chunk
    int chunks_ = 1;
    std::vector<LambTensor> lamb_tensors_;  // kLamb only (then optimizers_ is empty)
    std::vector<LambBlock> lamb_blocks_;
};

}  // namespace psrun::worker
