// The model's loss on its output [N, K] (plain f32; converted from the output's format by a
// reorder where it differs), computed in double on the host per example:
//   softmax cross-entropy against int32 labels in [0, K) (predictions: the arg-max); with label
//     smoothing E, against q = (1 - E) one-hot + E / K: -sum over k of q_k log p_k, gradient p - q
//     (torch's cross_entropy(label_smoothing=E));
//   mean squared error against float targets [N, K]: sum over k of (y - t)^2 / 2 per example
//     (so the gradient is y - t, as TF's l2_loss and PyTorch's MSELoss * K / 2);
//   sigmoid cross-entropy with logits against multi-hot targets in [0, 1] [N, K], summed over k.
// Reduced over the batch by mean (TF's reduce_mean) or sum. A graph loss (LossKind::kGraph):
// the output is the graph's own scalar loss, read as it is, with gradient 1; its head (the
// class scores [N, C] evaluation reads, model.head) gives outputs, predictions and
// probabilities (softmax), and labels()/targets() are empty (the network feeds its label
// input). With `gradient`, writes
// d(loss)/d(outputs) into the output's gradient memory (overwriting it: the loss is the first to
// run backward). Not thread-safe. The memories must outlive the loss.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "workerd/nn/model_description.h"

namespace psrun::nn {

class Loss {
  public:
    // `output`: the model output value's memory ({N, K}, any format/type); `diff_output` its
    // gradient memory (empty: forward only). `label_smoothing`: E above, softmax cross-entropy
    // only (std::invalid_argument otherwise, or outside [0, 1)). `head`: kGraph only, the head's
    // memory ({N, C}) or empty. `heads`: kGraph only, every head's memory (model.heads order),
    // read by head_outputs().
    Loss(const dnnl::engine& engine, const dnnl::stream& stream, const dnnl::memory& output,
         const dnnl::memory& diff_output, LossKind kind, LossReduction reduction, double label_smoothing = 0.0,
         const dnnl::memory& head = {}, const std::vector<dnnl::memory>& heads = {});

    std::span<std::int32_t> labels() { return labels_; }
    std::span<float> targets() { return targets_; }

    // Returns the loss; with `gradient` writes the gradient. A label outside [0, K) or a
    // non-finite target throws std::out_of_range naming the example.
    float forward(bool gradient);
    // Writes `grad` (plain [N, K]) as the gradient instead (tests).
    void set_gradient(std::span<const float> grad);
    std::span<const float> outputs() const;
    // Head k's scores of the last forward, plain f32 [N, width] (a per-position head's
    // [N, width, d1, ...]). REQUIRES: k < heads.size().
    std::span<const float> head_outputs(std::size_t k) const;
    std::span<const std::int32_t> predictions() const { return predictions_; }
    void probabilities(std::span<float> out) const;
    std::int64_t batch() const { return batch_; }
    std::int64_t width() const { return width_; }

  private:
    void build_graph_loss(const dnnl::engine& engine, const dnnl::memory& output, const dnnl::memory& diff_output,
                          const dnnl::memory& head);
    float graph_forward(bool gradient);
    void write_gradient();

    dnnl::stream stream_;
    LossKind kind_;
    LossReduction reduction_;
    double smoothing_;  // label smoothing E (softmax cross-entropy)
    std::int64_t batch_ = 0, width_ = 0;
    dnnl::memory output_, doutput_;                      // plain f32 (kGraph: output_ the head, doutput_ the scalar's)
    dnnl::memory value_;                                 // kGraph: the scalar loss, plain f32 {1}
    std::vector<dnnl::memory> heads_;                    // kGraph: plain f32 views of every head
    std::vector<std::function<void()>> before_, after_;  // reorders in / out
    std::vector<std::int32_t> labels_;
    std::vector<float> targets_;
    std::vector<std::int32_t> predictions_;
};

}  // namespace psrun::nn
