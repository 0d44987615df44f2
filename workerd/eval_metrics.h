// What an evaluation of a test set reports, by the model's loss (nn::LossKind):
//   softmax cross-entropy   top-1 accuracy
//   mean squared error      MSE and MAE over every target value
//   sigmoid cross-entropy   multi-label: a label is predicted when sigmoid(output) >= 0.5; F1 per
//                           label (2TP / (2TP + FP + FN); 1 for a label never true nor predicted),
//                           their mean (macro F1), and the exact-match accuracy (every label of
//                           an example right); with one label (a click model) also the ROC AUC
//                           (rank statistic, ties counted half; -1 when the test set holds one class)
//   graph loss              the graph's own loss, mean over the test set (weighted by each batch's
//                           examples; the trainer's evaluation batch divides the test set);
//                           with a head (model.head) scored as softmax cross-entropy as well
// and every head of model.heads scored by its kind (HeadMetrics; docs/models.md "Heads"):
//   softmax head            top-1 accuracy against its int labels; a per-position head
//                           (segmentation, nn::Head::spatial) the pixel accuracy over the
//                           positions whose label is not the loss's ignore_index, and the mean
//                           IoU: TP / (TP + FP + FN) per class from the confusion counts,
//                           averaged over the classes present in the labels or the predictions
//   value head              a regression's predictions against its float targets: MSE and MAE
//                           over every target value
//   sigmoid head            multi-label at 0.5 (logit >= 0): label accuracy (the share of
//                           example-label pairs right), exact match (every label of an example
//                           right), mean F1 over labels, mean ROC AUC over the labels whose test
//                           targets hold both classes (-1 when none does)
// EvalAccumulator sums batches; EvalMetrics is the plain result. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "workerd/nn/model_description.h"

namespace psrun::worker {

// Most classes a per-position head's confusion counts (and so its IoU) are kept for.
inline constexpr std::size_t kMaxConfusionClasses = 4096;

// One head's figures (nn::Head); -1 where a figure does not apply.
struct HeadMetrics {
    std::string name;  // the head's value
    nn::HeadKind kind = nn::HeadKind::kSoftmax;
    std::size_t examples = 0;
    double accuracy = -1;        // softmax: top-1
    double label_accuracy = -1;  // sigmoid: example-label pairs right
    double exact_match = -1;     // sigmoid: examples with every label right
    double mean_f1 = -1;         // sigmoid
    double mean_auc = -1;        // sigmoid: over the labels with both classes in the test set
    std::vector<double> auc;     // sigmoid: per label (-1: one class only)
    bool per_position = false;   // softmax over positions: `accuracy` is the pixel accuracy
    std::size_t positions = 0;   // per_position: the positions scored (labels not ignored)
    double mean_iou = -1;        // per_position
    std::vector<double> iou;     // per_position: per class (-1: absent from labels and predictions)
    double mse = -1;             // value: over every target value
    double mae = -1;             // value

    // {"test_accuracy/NAME"}, {"test_pixel_accuracy/NAME", "test_mean_iou/NAME"},
    // {"test_mse/NAME", "test_mae/NAME"} or
    // {"test_label_accuracy/NAME", "test_exact_match/NAME", "test_mean_f1/NAME",
    // "test_mean_auc/NAME"}, prefixed by `prefix`.
    void add_json(nlohmann::json& out, const std::string& prefix = "test_") const;
    // "logits: accuracy 97.12%", "scores: pixel accuracy 96.40%, mean IoU 0.8123" or "tags: label
    // accuracy 95.10%, exact match 85.00%, mean F1 0.912, mean AUC 0.9812".
    std::string text() const;
};

struct EvalMetrics {
    nn::LossKind loss = nn::LossKind::kSoftmaxCrossEntropy;
    std::size_t examples = 0;
    double accuracy = -1;  // top-1, or exact match (multi-label); -1 for regression
    double mse = -1;       // regression
    double mae = -1;
    std::vector<double> f1;  // multi-label, per label
    double mean_f1 = -1;
    double auc = -1;                 // one-label sigmoid cross-entropy
    double mean_loss = -1;           // a graph loss's (add_loss), -1 when not measured
    std::vector<HeadMetrics> heads;  // a graph loss's heads (add_head), in model.heads order

    // The figure a run's accuracy targets and "test accuracy" refer to: accuracy (also for
    // multi-label); -1 for regression, which has none.
    double score() const { return accuracy; }
    // "test accuracy 97.12%", "test MSE 0.0123, MAE 0.0831", "test exact match 81.20%, mean F1 0.874";
    // several heads add "; heads: " and each head's text().
    std::string text() const;
    // {"test_accuracy": ..} or {"test_mse": .., "test_mae": ..} or {"test_accuracy", "test_mean_f1",
    // "test_f1": [..]}: the keys metrics.jsonl, summary.json and eval.json carry; and every
    // head's keys (HeadMetrics::add_json).
    nlohmann::json json() const;
    // text() and json() without the heads.
    std::string headless_text() const;
    nlohmann::json headless_json() const;
};

class EvalAccumulator {
  public:
    // `width`: the model's output width (classes, or the target width T). `probabilities`: add()
    // gets softmax/sigmoid outputs (nn::Network::probabilities, psrun predict) instead of the
    // model's raw outputs (a multi-label prediction is then p >= 0.5 instead of logit >= 0).
    EvalAccumulator(nn::LossKind loss, std::int64_t width, bool probabilities = false);
    // One batch: the first `valid` rows of `outputs` ([N, width]), with
    // `labels` (class models) or `targets` ([N, width]).
    void add(std::span<const float> outputs, std::span<const std::int32_t> labels, std::span<const float> targets,
             std::size_t valid);
    // A graph loss: the loss of one batch of which `valid` rows are examples.
    void add_loss(double loss, std::size_t valid);
    // Scores heads too (a graph loss's model.heads); call before add_head.
    void set_heads(const std::vector<nn::Head>& heads);
    // Head k's batch: the first `valid` rows of `outputs` ([N, width] scores, or probabilities
    // with `probabilities`; a per-position head's [N, width, positions]), with `labels` (softmax
    // head; [N, positions] per position) or `targets` ([N, width], sigmoid head).
    void add_head(std::size_t k, std::span<const float> outputs, std::span<const std::int32_t> labels,
                  std::span<const float> targets, std::size_t valid);
    EvalMetrics result() const;

  private:
    EvalMetrics totals() const;  // result() without the heads
    struct HeadSums;
    // add_head for a per-position head: argmax over the classes at each position.
    static void add_positions(HeadSums& s, std::span<const float> outputs, std::span<const std::int32_t> labels,
                              std::size_t valid);
    nn::LossKind loss_;
    std::size_t width_;
    float threshold_;  // multi-label: an output at or above it predicts the label
    std::size_t examples_ = 0;
    std::size_t correct_ = 0;  // top-1 or exact matches
    double loss_sum_ = 0;      // add_loss: sum of loss * valid
    std::size_t loss_examples_ = 0;
    double squared_ = 0, absolute_ = 0;
    std::vector<std::size_t> tp_, fp_, fn_;
    std::vector<std::pair<float, bool>> scored_;  // one-label sigmoid cross-entropy: (output, truth) for the AUC
    struct HeadSums {
        nn::Head head;
        std::size_t examples = 0, correct = 0, labels_right = 0;
        std::vector<std::size_t> tp, fp, fn;
        std::vector<std::vector<std::pair<float, bool>>> scored;  // per label (sigmoid)
        std::size_t positions = 0;                                // per position: labels scored
        std::vector<std::size_t> confusion;                       // per position: [label][predicted]
        double squared = 0, absolute = 0;                         // value: summed over every target value
    };
    std::vector<HeadSums> heads_;
    bool probabilities_ = false;
};

}  // namespace psrun::worker
