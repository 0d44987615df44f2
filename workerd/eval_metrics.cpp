#include "workerd/eval_metrics.h"

#include <algorithm>
#include <cmath>

#include <fmt/format.h>

namespace psrun::worker {

void HeadMetrics::add_json(nlohmann::json& out, const std::string& prefix) const {
    if (per_position) {
        out[prefix + "pixel_accuracy/" + name] = accuracy;
        out[prefix + "mean_iou/" + name] = mean_iou;
        return;
    }
    if (kind == nn::HeadKind::kSoftmax) {
        out[prefix + "accuracy/" + name] = accuracy;
        return;
    }
    if (kind == nn::HeadKind::kValue) {
        out[prefix + "mse/" + name] = mse;
        out[prefix + "mae/" + name] = mae;
        return;
    }
    out[prefix + "label_accuracy/" + name] = label_accuracy;
    out[prefix + "exact_match/" + name] = exact_match;
    out[prefix + "mean_f1/" + name] = mean_f1;
    out[prefix + "mean_auc/" + name] = mean_auc;
}

std::string HeadMetrics::text() const {
    if (per_position) return fmt::format("{}: pixel accuracy {:.2f}%, mean IoU {:.4f}", name, accuracy * 100, mean_iou);
    if (kind == nn::HeadKind::kSoftmax) return fmt::format("{}: accuracy {:.2f}%", name, accuracy * 100);
    if (kind == nn::HeadKind::kValue) return fmt::format("{}: MSE {:.4g}, MAE {:.4g}", name, mse, mae);
    return fmt::format("{}: label accuracy {:.2f}%, exact match {:.2f}%, mean F1 {:.3f}, mean AUC {}", name,
                       label_accuracy * 100, exact_match * 100, mean_f1,
                       mean_auc >= 0 ? fmt::format("{:.4f}", mean_auc) : std::string("n/a"));
}

std::string EvalMetrics::text() const {
    std::string out = headless_text();
    if (heads.size() > 1 || (heads.size() == 1 && (heads[0].kind != nn::HeadKind::kSoftmax || heads[0].per_position))) {
        out += out.empty() ? "heads: " : "; heads: ";
        for (std::size_t k = 0; k < heads.size(); ++k) out += (k ? ", " : "") + heads[k].text();
    }
    return out;
}

std::string EvalMetrics::headless_text() const {
    const std::string graph = mean_loss >= 0 ? fmt::format("test loss {:.4g}", mean_loss) : std::string();
    switch (loss) {
        case nn::LossKind::kGraph: return graph;
        case nn::LossKind::kMeanSquaredError: return fmt::format("test MSE {:.4g}, MAE {:.4g}", mse, mae);
        case nn::LossKind::kSigmoidCrossEntropy:
            return fmt::format("test exact match {:.2f}%, mean F1 {:.3f}{}", accuracy * 100, mean_f1,
                               auc >= 0 ? fmt::format(", AUC {:.4f}", auc) : std::string());
        case nn::LossKind::kSoftmaxCrossEntropy: break;
    }
    return fmt::format("test accuracy {:.2f}%", accuracy * 100) + (graph.empty() ? "" : ", " + graph);
}

nlohmann::json EvalMetrics::json() const {
    nlohmann::json out = headless_json();
    for (const auto& h : heads) h.add_json(out);
    return out;
}

nlohmann::json EvalMetrics::headless_json() const {
    switch (loss) {
        case nn::LossKind::kGraph: return {{"test_loss", mean_loss}};
        case nn::LossKind::kMeanSquaredError: return {{"test_mse", mse}, {"test_mae", mae}};
        case nn::LossKind::kSigmoidCrossEntropy: {
            nlohmann::json out = {{"test_accuracy", accuracy}, {"test_mean_f1", mean_f1}, {"test_f1", f1}};
            if (auc >= 0) out["test_auc"] = auc;
            return out;
        }
        case nn::LossKind::kSoftmaxCrossEntropy: break;
    }
    nlohmann::json out = {{"test_accuracy", accuracy}};
    if (mean_loss >= 0) out["test_loss"] = mean_loss;
    return out;
}

namespace {

// The probability that a random positive scores above a random negative (ties: half).
double roc_auc(std::vector<std::pair<float, bool>> scored) {
    std::sort(scored.begin(), scored.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    double positives = 0, rank_sum = 0;
    for (std::size_t i = 0; i < scored.size();) {
        std::size_t j = i;
        while (j < scored.size() && scored[j].first == scored[i].first) ++j;
        const double mid_rank =
            (static_cast<double>(i + 1) + static_cast<double>(j)) / 2;  // ranks 1-based, ties averaged
        for (std::size_t k = i; k < j; ++k)
            if (scored[k].second) {
                positives += 1;
                rank_sum += mid_rank;
            }
        i = j;
    }
    const double negatives = static_cast<double>(scored.size()) - positives;
    if (positives == 0 || negatives == 0) return -1;
    return (rank_sum - positives * (positives + 1) / 2) / (positives * negatives);
}

// Per class TP / (TP + FP + FN) from a square confusion matrix ([label][predicted]) into `iou`
// (-1 for a class neither labelled nor predicted), and their mean over the classes present;
// -1 when there is no matrix or no class is present.
double mean_iou(const std::vector<std::size_t>& confusion, std::vector<double>& iou) {
    const auto w = static_cast<std::size_t>(std::lround(std::sqrt(static_cast<double>(confusion.size()))));
    iou.assign(w, -1.0);
    double sum = 0;
    std::size_t present = 0;
    for (std::size_t c = 0; c < w; ++c) {
        std::size_t labelled = 0, predicted = 0;
        for (std::size_t o = 0; o < w; ++o) {
            labelled += confusion[c * w + o];
            predicted += confusion[o * w + c];
        }
        const std::size_t tp = confusion[c * w + c], united = labelled + predicted - tp;
        if (united == 0) continue;
        iou[c] = static_cast<double>(tp) / static_cast<double>(united);
        sum += iou[c];
        ++present;
    }
    return present > 0 ? sum / static_cast<double>(present) : -1.0;
}

}  // namespace

EvalAccumulator::EvalAccumulator(nn::LossKind loss, std::int64_t width, bool probabilities)
    : loss_(loss),
      width_(static_cast<std::size_t>(width > 0 ? width : 1)),
      threshold_(probabilities ? 0.5f : 0.0f),
      probabilities_(probabilities) {
    if (loss_ == nn::LossKind::kSigmoidCrossEntropy) {
        tp_.assign(width_, 0);
        fp_.assign(width_, 0);
        fn_.assign(width_, 0);
    }
}

void EvalAccumulator::add(std::span<const float> outputs, std::span<const std::int32_t> labels,
                          std::span<const float> targets, std::size_t valid) {
    for (std::size_t i = 0; i < valid; ++i) {
        const float* y = outputs.data() + i * width_;
        switch (loss_) {
            case nn::LossKind::kSoftmaxCrossEntropy: {
                std::size_t best = 0;
                for (std::size_t c = 1; c < width_; ++c)
                    if (y[c] > y[best]) best = c;
                correct_ += i < labels.size() && static_cast<std::int64_t>(best) == labels[i] ? 1 : 0;
                break;
            }
            case nn::LossKind::kMeanSquaredError:
                for (std::size_t c = 0; c < width_; ++c) {
                    const double d = static_cast<double>(y[c]) - targets[i * width_ + c];
                    squared_ += d * d;
                    absolute_ += std::fabs(d);
                }
                break;
            case nn::LossKind::kGraph: break;  // add_loss
            case nn::LossKind::kSigmoidCrossEntropy: {
                bool all = true;
                for (std::size_t c = 0; c < width_; ++c) {
                    const bool predicted = y[c] >= threshold_;  // sigmoid(logit) >= 0.5
                    const bool truth = targets[i * width_ + c] >= 0.5f;
                    tp_[c] += predicted && truth;
                    fp_[c] += predicted && !truth;
                    fn_[c] += !predicted && truth;
                    all = all && predicted == truth;
                }
                correct_ += all ? 1 : 0;
                if (width_ == 1) scored_.emplace_back(y[0], targets[i] >= 0.5f);
                break;
            }
        }
    }
    examples_ += valid;
}

void EvalAccumulator::set_heads(const std::vector<nn::Head>& heads) {
    heads_.clear();
    for (const auto& h : heads) {
        HeadSums sums;
        sums.head = h;
        const auto w = static_cast<std::size_t>(std::max<std::int64_t>(h.width, 1));
        if (!h.spatial.empty() && w <= kMaxConfusionClasses) sums.confusion.assign(w * w, 0);
        if (h.kind == nn::HeadKind::kSigmoid) {
            sums.tp.assign(w, 0);
            sums.fp.assign(w, 0);
            sums.fn.assign(w, 0);
            sums.scored.resize(w);
        }
        heads_.push_back(std::move(sums));
    }
}

void EvalAccumulator::add_head(std::size_t k, std::span<const float> outputs, std::span<const std::int32_t> labels,
                               std::span<const float> targets, std::size_t valid) {
    HeadSums& s = heads_.at(k);
    const auto w = static_cast<std::size_t>(std::max<std::int64_t>(s.head.width, 1));
    if (!s.head.spatial.empty()) {
        add_positions(s, outputs, labels, valid);
        return;
    }
    const float threshold = probabilities_ ? 0.5f : 0.0f;
    for (std::size_t i = 0; i < valid; ++i) {
        const float* y = outputs.data() + i * w;
        if (s.head.kind == nn::HeadKind::kSoftmax) {
            std::size_t best = 0;
            for (std::size_t c = 1; c < w; ++c)
                if (y[c] > y[best]) best = c;
            s.correct += i < labels.size() && static_cast<std::int64_t>(best) == labels[i] ? 1 : 0;
            continue;
        }
        if (s.head.kind == nn::HeadKind::kValue) {
            for (std::size_t c = 0; c < w; ++c) {
                const double d = static_cast<double>(y[c]) - targets[i * w + c];
                s.squared += d * d;
                s.absolute += std::fabs(d);
            }
            continue;
        }
        bool all = true;
        for (std::size_t c = 0; c < w; ++c) {
            const bool predicted = y[c] >= threshold;
            const bool truth = targets[i * w + c] >= 0.5f;
            s.tp[c] += predicted && truth;
            s.fp[c] += predicted && !truth;
            s.fn[c] += !predicted && truth;
            s.labels_right += predicted == truth;
            all = all && predicted == truth;
            s.scored[c].emplace_back(y[c], truth);
        }
        s.correct += all ? 1 : 0;
    }
    s.examples += valid;
}

void EvalAccumulator::add_positions(HeadSums& s, std::span<const float> outputs, std::span<const std::int32_t> labels,
                                    std::size_t valid) {
    const auto w = static_cast<std::size_t>(std::max<std::int64_t>(s.head.width, 1));
    const auto p = static_cast<std::size_t>(s.head.positions());
    for (std::size_t i = 0; i < valid && (i + 1) * p <= labels.size(); ++i) {
        const float* y = outputs.data() + i * w * p;
        for (std::size_t q = 0; q < p; ++q) {
            const std::int32_t label = labels[i * p + q];
            if (s.head.ignore_index && label == *s.head.ignore_index) continue;
            std::size_t best = 0;
            for (std::size_t c = 1; c < w; ++c)
                if (y[c * p + q] > y[best * p + q]) best = c;
            s.correct += static_cast<std::int64_t>(best) == label ? 1 : 0;
            ++s.positions;
            if (!s.confusion.empty() && label >= 0 && static_cast<std::size_t>(label) < w)
                ++s.confusion[static_cast<std::size_t>(label) * w + best];
        }
    }
    s.examples += valid;
}

void EvalAccumulator::add_loss(double loss, std::size_t valid) {
    loss_sum_ += loss * static_cast<double>(valid);
    loss_examples_ += valid;
}

EvalMetrics EvalAccumulator::result() const {
    EvalMetrics m = totals();
    for (const auto& s : heads_) {
        HeadMetrics h;
        h.name = s.head.value;
        h.kind = s.head.kind;
        h.examples = s.examples;
        h.per_position = !s.head.spatial.empty();
        if (h.per_position) {
            h.positions = s.positions;
            if (s.positions > 0) h.accuracy = static_cast<double>(s.correct) / static_cast<double>(s.positions);
            h.mean_iou = mean_iou(s.confusion, h.iou);
        } else if (s.examples > 0) {
            const double n = static_cast<double>(s.examples);
            if (h.kind == nn::HeadKind::kSoftmax) {
                h.accuracy = static_cast<double>(s.correct) / n;
            } else if (h.kind == nn::HeadKind::kValue) {
                const double values = n * static_cast<double>(std::max<std::int64_t>(s.head.width, 1));
                h.mse = s.squared / values;
                h.mae = s.absolute / values;
            } else {
                const auto w = s.tp.size();
                h.exact_match = static_cast<double>(s.correct) / n;
                h.label_accuracy = static_cast<double>(s.labels_right) / (n * static_cast<double>(w));
                double f1 = 0, auc = 0;
                std::size_t aucs = 0;
                for (std::size_t c = 0; c < w; ++c) {
                    const auto denominator = 2 * s.tp[c] + s.fp[c] + s.fn[c];
                    f1 +=
                        denominator == 0 ? 1.0 : 2.0 * static_cast<double>(s.tp[c]) / static_cast<double>(denominator);
                    h.auc.push_back(roc_auc(s.scored[c]));
                    if (h.auc.back() >= 0) {
                        auc += h.auc.back();
                        ++aucs;
                    }
                }
                h.mean_f1 = f1 / static_cast<double>(w);
                h.mean_auc = aucs ? auc / static_cast<double>(aucs) : -1;
            }
        }
        m.heads.push_back(std::move(h));
    }
    return m;
}

EvalMetrics EvalAccumulator::totals() const {
    EvalMetrics m;
    m.loss = loss_;
    m.examples = examples_;
    if (loss_examples_ > 0) m.mean_loss = loss_sum_ / static_cast<double>(loss_examples_);
    if (examples_ == 0) return m;
    if (loss_ == nn::LossKind::kGraph) return m;
    const double n = static_cast<double>(examples_);
    if (loss_ == nn::LossKind::kMeanSquaredError) {
        m.mse = squared_ / (n * static_cast<double>(width_));
        m.mae = absolute_ / (n * static_cast<double>(width_));
        return m;
    }
    m.accuracy = static_cast<double>(correct_) / n;
    if (loss_ == nn::LossKind::kSigmoidCrossEntropy) {
        double sum = 0;
        for (std::size_t c = 0; c < width_; ++c) {
            const auto denominator = 2 * tp_[c] + fp_[c] + fn_[c];
            m.f1.push_back(denominator == 0 ? 1.0
                                            : 2.0 * static_cast<double>(tp_[c]) / static_cast<double>(denominator));
            sum += m.f1.back();
        }
        m.mean_f1 = sum / static_cast<double>(width_);
        if (width_ == 1) m.auc = roc_auc(scored_);
    }
    return m;
}

}  // namespace psrun::worker
