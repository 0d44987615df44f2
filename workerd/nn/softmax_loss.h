// Softmax cross-entropy of the logits against int32 labels, reduced over the batch by mean
// (TF's reduce_mean) or sum; the arg-max predictions; and, when asked, the gradient
// d(loss)/d(logits) = (softmax - onehot) / (N or 1), written into the last layer's diff_dst
// (converted to its format/type by a reorder when it differs from plain f32 {N, classes}).
// Computed in double on the host per example. Not thread-safe. The logits memory and the
// gradient target must outlive the loss.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "workerd/nn/model_description.h"

namespace psrun::nn {

class SoftmaxLoss {
public:
    // `logits`: the last layer's dst() ({N, classes} or {N, classes, 1, 1}, any format/type);
    // `diff_logits`: its diff_dst() (empty: forward only).
    SoftmaxLoss(const dnnl::engine& engine, const dnnl::stream& stream, const dnnl::memory& logits,
                const dnnl::memory& diff_logits, LossReduction reduction);

    // Returns the loss; fills predictions(); with `gradient` writes the logits' gradient.
    // REQUIRES: labels.size() == batch. A label outside [0, classes) throws std::out_of_range.
    float forward(std::span<const std::int32_t> labels, bool gradient);
    std::span<const std::int32_t> predictions() const { return predictions_; }
    // Writes the softmax of the logits of the last forward() into `out` ({batch, classes}
    // row-major, each row summing to 1; computed in double on demand, so training steps pay
    // nothing for it). REQUIRES: out.size() == batch * classes (else std::invalid_argument).
    void probabilities(std::span<float> out) const;
    std::int64_t batch() const { return batch_; }
    std::int64_t classes() const { return classes_; }

private:
    dnnl::stream stream_;
    LossReduction reduction_;
    std::int64_t batch_ = 0, classes_ = 0;
    dnnl::memory logits_, dlogits_;  // plain f32
    std::vector<std::function<void()>> before_, after_;  // reorders in / out
    std::vector<std::int32_t> predictions_;
};

}  // namespace psrun::nn
