// EvalAccumulator (workerd/eval_metrics.h): the figures of each loss kind against hand-computed
// values, summed over batches.
#include <catch2/catch.hpp>

#include <vector>

#include "workerd/eval_metrics.h"

using psrun::nn::LossKind;
using psrun::worker::EvalAccumulator;

TEST_CASE("classification: top-1 accuracy over batches; rows past `valid` do not count", "[eval_metrics]") {
    EvalAccumulator sums(LossKind::kSoftmaxCrossEntropy, 3);
    // Batch 1: predicted 2, 0 (labels 2, 1); batch 2: predicted 1 (label 1), then a padding row.
    sums.add(std::vector<float>{0.1f, 0.2f, 0.9f, 5.0f, 1.0f, 0.0f}, std::vector<std::int32_t>{2, 1}, {}, 2);
    sums.add(std::vector<float>{0.0f, 3.0f, 1.0f, 9.0f, 0.0f, 0.0f}, std::vector<std::int32_t>{1, 1}, {}, 1);
    const auto m = sums.result();
    CHECK(m.examples == 3);
    CHECK(m.accuracy == Approx(2.0 / 3.0));
    CHECK(m.score() == Approx(2.0 / 3.0));
    CHECK(m.mse < 0);
    CHECK(m.text() == "test accuracy 66.67%");
    CHECK(m.json() == nlohmann::json{{"test_accuracy", m.accuracy}});
}

TEST_CASE("regression: MSE and MAE over every target value; no accuracy", "[eval_metrics]") {
    EvalAccumulator sums(LossKind::kMeanSquaredError, 2);
    // Errors: (1, -2) and (0.5, 0) -> squares 1, 4, 0.25, 0 -> MSE 5.25 / 4; |e| 1, 2, 0.5, 0 -> MAE 3.5 / 4.
    sums.add(std::vector<float>{2.0f, 0.0f}, {}, std::vector<float>{1.0f, 2.0f}, 1);
    sums.add(std::vector<float>{1.5f, 3.0f}, {}, std::vector<float>{1.0f, 3.0f}, 1);
    const auto m = sums.result();
    CHECK(m.mse == Approx(5.25 / 4));
    CHECK(m.mae == Approx(3.5 / 4));
    CHECK(m.accuracy < 0);
    CHECK(m.score() < 0);
    CHECK(m.text() == "test MSE 1.312, MAE 0.875");
    CHECK(m.json().contains("test_mse"));
    CHECK_FALSE(m.json().contains("test_accuracy"));
}

TEST_CASE("multi-label: per-label F1 from logits at sigmoid 0.5, macro mean, exact match", "[eval_metrics]") {
    EvalAccumulator sums(LossKind::kSigmoidCrossEntropy, 3);
    // Logits >= 0 predict a label. Example 1: predicted {0, 1}, truth {0};    example 2: predicted {1},
    // truth {1}; example 3: predicted {}, truth {0}. Label 0: TP 1, FN 1 -> F1 2/3. Label 1: TP 1, FP 1
    // -> F1 2/3. Label 2: never true nor predicted -> 1. Exact match: example 2 only.
    sums.add(std::vector<float>{0.5f, 2.0f, -1.0f, -3.0f, 0.0f, -2.0f}, {}, std::vector<float>{1, 0, 0, 0, 1, 0}, 2);
    sums.add(std::vector<float>{-0.1f, -1.0f, -1.0f}, {}, std::vector<float>{1, 0, 0}, 1);
    const auto m = sums.result();
    REQUIRE(m.f1.size() == 3);
    CHECK(m.f1[0] == Approx(2.0 / 3.0));
    CHECK(m.f1[1] == Approx(2.0 / 3.0));
    CHECK(m.f1[2] == 1.0);
    CHECK(m.mean_f1 == Approx((2.0 / 3.0 + 2.0 / 3.0 + 1.0) / 3.0));
    CHECK(m.accuracy == Approx(1.0 / 3.0));
    CHECK(m.text() == "test exact match 33.33%, mean F1 0.778");
    CHECK(m.json()["test_f1"].size() == 3);
}

TEST_CASE("an empty test set gives no figures", "[eval_metrics]") {
    const auto m = EvalAccumulator(LossKind::kMeanSquaredError, 4).result();
    CHECK(m.examples == 0);
    CHECK(m.mse < 0);
    CHECK(m.accuracy < 0);
}

TEST_CASE("one label (a click model): ROC AUC by ranks, ties counted half", "[eval_metrics]") {
    EvalAccumulator sums(LossKind::kSigmoidCrossEntropy, 1);
    // Scores 0.1 (neg), 0.4 (pos), 0.4 (neg), 0.8 (pos), 0.9 (neg). Pairs (pos, neg): 0.4 vs 0.1 win,
    // vs 0.4 tie, vs 0.9 loss; 0.8 vs 0.1 win, vs 0.4 win, vs 0.9 loss -> (3 + 0.5) / 6.
    sums.add(std::vector<float>{0.1f, 0.4f, 0.4f}, {}, std::vector<float>{0, 1, 0}, 3);
    sums.add(std::vector<float>{0.8f, 0.9f, 7.0f}, {}, std::vector<float>{1, 0, 1}, 2);  // the third row is padding
    const auto m = sums.result();
    CHECK(m.auc == Approx(3.5 / 6.0));
    CHECK(m.json()["test_auc"] == Approx(3.5 / 6.0));
    CHECK(m.text() == "test exact match 40.00%, mean F1 0.571, AUC 0.5833");
    EvalAccumulator one_class(LossKind::kSigmoidCrossEntropy, 1);
    one_class.add(std::vector<float>{0.3f, 0.6f}, {}, std::vector<float>{1, 1}, 2);
    CHECK(one_class.result().auc < 0);
    CHECK_FALSE(one_class.result().json().contains("test_auc"));
    EvalAccumulator two(LossKind::kSigmoidCrossEntropy, 2);  // several labels: no AUC
    two.add(std::vector<float>{0.3f, 0.6f}, {}, std::vector<float>{1, 0}, 1);
    CHECK(two.result().auc < 0);
}

TEST_CASE("heads: each scored by its kind, keys named by the head", "[eval_metrics][heads]") {
    using psrun::nn::Head;
    using psrun::nn::HeadKind;
    EvalAccumulator sums(LossKind::kSoftmaxCrossEntropy, 2);
    sums.set_heads({Head{"cls", HeadKind::kSoftmax, "y", 2, {}, {}}, Head{"tags", HeadKind::kSigmoid, "t", 2, {}, {}}});
    // Softmax: predicted 1, 0, 0 against 1, 1, 0 -> 2/3.
    sums.add_head(0, std::vector<float>{0.0f, 1.0f, 2.0f, 1.0f, 3.0f, 0.0f}, std::vector<std::int32_t>{1, 1, 0}, {}, 3);
    // Sigmoid logits (>= 0 predicts): example 0 (1, -1) vs (1, 0): both right; example 1 (2, 0.5)
    // vs (0, 1): label 0 wrong; example 2 (-1, -2) vs (0, 1): label 1 wrong.
    sums.add_head(1, std::vector<float>{1.0f, -1.0f, 2.0f, 0.5f, -1.0f, -2.0f}, {},
                  std::vector<float>{1, 0, 0, 1, 0, 1}, 3);
    const auto m = sums.result();
    REQUIRE(m.heads.size() == 2);
    CHECK(m.heads[0].accuracy == Approx(2.0 / 3.0));
    const auto& t = m.heads[1];
    CHECK(t.label_accuracy == Approx(4.0 / 6.0));
    CHECK(t.exact_match == Approx(1.0 / 3.0));
    // Label 0: scores 1 (pos), 2, -1 (neg): AUC 1/2. Label 1: -1 (neg), 0.5, -2 (pos): AUC 1/2.
    CHECK(t.auc == std::vector<double>{0.5, 0.5});
    CHECK(t.mean_auc == Approx(0.5));
    // F1: label 0 tp 1 fp 1 fn 0 -> 2/3; label 1 tp 1 fp 0 fn 1 -> 2/3.
    CHECK(t.mean_f1 == Approx(2.0 / 3.0));
    const auto j = m.json();
    CHECK(j.at("test_accuracy/cls") == Approx(2.0 / 3.0));
    CHECK(j.at("test_label_accuracy/tags") == Approx(4.0 / 6.0));
    CHECK(j.at("test_exact_match/tags") == Approx(1.0 / 3.0));
    CHECK(j.at("test_mean_auc/tags") == Approx(0.5));
    CHECK(j.contains("test_mean_f1/tags"));
    CHECK(m.text().find("heads: cls: accuracy 66.67%, tags: label accuracy 66.67%") != std::string::npos);
    // Probabilities (psrun eval): a label is predicted at p >= 0.5.
    EvalAccumulator probs(LossKind::kGraph, 1, true);
    probs.set_heads({Head{"tags", HeadKind::kSigmoid, "t", 1, {}, {}}});
    probs.add_head(0, std::vector<float>{0.6f, 0.4f}, {}, std::vector<float>{1, 1}, 2);
    CHECK(probs.result().heads[0].label_accuracy == Approx(0.5));
    CHECK(probs.result().heads[0].mean_auc < 0);  // one class only
}

TEST_CASE("a value head: MSE and MAE over every target value", "[eval_metrics][heads]") {
    using psrun::nn::Head;
    using psrun::nn::HeadKind;
    EvalAccumulator sums(LossKind::kGraph, 1);
    sums.set_heads({Head{"pred", HeadKind::kValue, "t", 2, {}, {}}});
    // Differences 1, -2 (example 0) and 0.5, 0 (example 1); a third row is padding.
    sums.add_head(0, std::vector<float>{2.0f, 1.0f, 0.5f, 4.0f, 9.0f, 9.0f}, {}, std::vector<float>{1, 3, 0, 4, 0, 0},
                  2);
    sums.add_loss(0.5, 2);
    const auto m = sums.result();
    REQUIRE(m.heads.size() == 1);
    CHECK(m.heads[0].mse == Approx((1.0 + 4.0 + 0.25) / 4.0));
    CHECK(m.heads[0].mae == Approx((1.0 + 2.0 + 0.5) / 4.0));
    CHECK(m.heads[0].accuracy < 0);
    const auto j = m.json();
    CHECK(j.at("test_mse/pred") == Approx(1.3125));
    CHECK(j.at("test_mae/pred") == Approx(0.875));
    CHECK(m.text() == "test loss 0.5; heads: pred: MSE 1.312, MAE 0.875");
}

TEST_CASE("a per-position head: pixel accuracy and mean IoU, ignored labels skipped", "[eval_metrics][heads]") {
    using psrun::nn::Head;
    using psrun::nn::HeadKind;
    EvalAccumulator sums(LossKind::kGraph, 1);
    Head seg{"scores", HeadKind::kSoftmax, "masks", 3, {}, {}};
    seg.spatial = {2, 2};  // scores [N, 3, 2, 2], masks [N, 2, 2]
    seg.ignore_index = 255;
    sums.set_heads({seg});
    // Two examples, each 3 classes x 4 positions (class-major: position q of class c at c * 4 + q).
    // Example 0 predicts 0, 1, 2, 2; example 1 predicts 1, 1, 0, 2.
    const std::vector<float> scores = {
        9, 0, 0, 0, /**/ 0, 9, 0, 0, /**/ 0, 0, 9, 9,  // example 0
        0, 0, 9, 0, /**/ 9, 9, 0, 0, /**/ 0, 0, 0, 9,  // example 1
        5, 5, 5, 5, /**/ 0, 0, 0, 0, /**/ 0, 0, 0, 0,  // a row past `valid`: not scored
    };
    // Labels 0, 1, 1, 2 and 1, 255 (ignored), 0, 0.
    const std::vector<std::int32_t> masks = {0, 1, 1, 2, 1, 255, 0, 0, 2, 2, 2, 2};
    sums.add_head(0, scores, masks, {}, 2);
    const auto m = sums.result();
    REQUIRE(m.heads.size() == 1);
    const auto& h = m.heads[0];
    CHECK(h.per_position);
    CHECK(h.positions == 7);
    // Right: (0,0) (1,1) (2,2) | (1,1) (0,0): 5 of 7.
    CHECK(h.accuracy == Approx(5.0 / 7.0));
    // Confusion [label][predicted]: label 0: ->0 twice, ->2 once (ex 1's last); label 1: ->1
    // twice, ->2 once; label 2: ->2 once. IoU 0: 2 / (3 + 2 - 2) = 2/3; 1: 2 / (3 + 2 - 2) = 2/3;
    // 2: 1 / (1 + 3 - 1) = 1/3.
    REQUIRE(h.iou.size() == 3);
    CHECK(h.iou[0] == Approx(2.0 / 3.0));
    CHECK(h.iou[1] == Approx(2.0 / 3.0));
    CHECK(h.iou[2] == Approx(1.0 / 3.0));
    CHECK(h.mean_iou == Approx(5.0 / 9.0));
    const auto j = m.json();
    CHECK(j.at("test_pixel_accuracy/scores") == Approx(5.0 / 7.0));
    CHECK(j.at("test_mean_iou/scores") == Approx(5.0 / 9.0));
    CHECK_FALSE(j.contains("test_accuracy/scores"));
    CHECK(m.text().find("heads: scores: pixel accuracy 71.43%, mean IoU 0.5556") != std::string::npos);
}
