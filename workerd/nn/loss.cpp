#include "workerd/nn/loss.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "workerd/nn/kernel.h"
#include "workerd/nn/network_plan.h"  // add_reorder

namespace psrun::nn {

using dnnl::memory;
using Dt = memory::data_type;

namespace {

// `m` itself when it is `plain`, else a plain copy: read from `m` by a reorder added to `ops`
// (`read`), or written back into `m` (not `read`).
memory plain_view(const dnnl::engine& engine, const dnnl::stream& stream, const memory& m, const memory::desc& plain,
                  std::vector<std::function<void()>>& ops, bool read) {
    if (m.get_desc() == plain) return m;
    memory copy(plain, engine);
    if (read) add_reorder(ops, stream, m, copy, false);
    else add_reorder(ops, stream, copy, m, false);
    return copy;
}

// log(1 + e^x) without overflow.
double softplus(double x) { return x > 0 ? x + std::log1p(std::exp(-x)) : std::log1p(std::exp(x)); }

}  // namespace

Loss::Loss(const dnnl::engine& engine, const dnnl::stream& stream, const memory& output, const memory& diff_output,
           LossKind kind, LossReduction reduction, double label_smoothing, const memory& head,
           const std::vector<memory>& heads)
    : stream_(stream), kind_(kind), reduction_(reduction), smoothing_(label_smoothing) {
    if (kind == LossKind::kGraph) {
        if (label_smoothing != 0.0)
            throw std::invalid_argument("label smoothing of a graph loss is its loss node's (\"label_smoothing\")");
        build_graph_loss(engine, output, diff_output, head);
        for (const auto& h : heads)
            heads_.push_back(plain_view(engine, stream_, h, plain_desc(h.get_desc().dims(), Dt::f32), before_, true));
        return;
    }
    if (!(label_smoothing >= 0.0 && label_smoothing < 1.0))
        throw std::invalid_argument("label smoothing " + std::to_string(label_smoothing) + " is outside [0, 1)");
    if (label_smoothing > 0.0 && kind != LossKind::kSoftmaxCrossEntropy)
        throw std::invalid_argument(std::string("label smoothing applies to softmax cross-entropy, not ") +
                                    to_string(kind));
    const auto dims = output.get_desc().dims();
    batch_ = dims.at(0);
    width_ = dims.at(1);
    const memory::desc plain = plain_desc(dims, Dt::f32);
    output_ = plain_view(engine, stream_, output, plain, before_, true);
    if (diff_output) doutput_ = plain_view(engine, stream_, diff_output, plain, after_, false);
    const auto n = static_cast<std::size_t>(batch_);
    predictions_.assign(n, 0);
    if (kind_ == LossKind::kSoftmaxCrossEntropy) labels_.assign(n, 0);
    else targets_.assign(n * static_cast<std::size_t>(width_), 0.0f);
}

std::span<const float> Loss::outputs() const {
    if (!output_) return {};
    return {static_cast<const float*>(output_.get_data_handle()), static_cast<std::size_t>(batch_ * width_)};
}

std::span<const float> Loss::head_outputs(std::size_t k) const {
    const memory& m = heads_.at(k);
    std::int64_t elements = 1;
    for (const auto d : m.get_desc().dims()) elements *= d;
    return {static_cast<const float*>(m.get_data_handle()), static_cast<std::size_t>(elements)};
}

void Loss::build_graph_loss(const dnnl::engine& engine, const memory& output, const memory& diff_output,
                            const memory& head) {
    const memory::desc scalar = plain_desc({1}, Dt::f32);
    value_ = plain_view(engine, stream_, output, scalar, before_, true);
    if (diff_output) doutput_ = plain_view(engine, stream_, diff_output, scalar, after_, false);
    if (!head) return;
    const auto dims = head.get_desc().dims();
    batch_ = dims.at(0);
    width_ = dims.at(1);
    output_ = plain_view(engine, stream_, head, plain_desc(dims, Dt::f32), before_, true);
    predictions_.assign(static_cast<std::size_t>(batch_), 0);
}

float Loss::graph_forward(bool gradient) {
    for (auto& op : before_) op();
    stream_.wait();
    const float loss = *static_cast<const float*>(value_.get_data_handle());
    if (output_) {
        const auto z = static_cast<std::size_t>(width_);
        const float* out = static_cast<const float*>(output_.get_data_handle());
        for (std::size_t b = 0; b < predictions_.size(); ++b) {
            const float* row = out + b * z;
            predictions_[b] = static_cast<std::int32_t>(std::max_element(row, row + z) - row);
        }
    }
    if (gradient && doutput_) {
        *static_cast<float*>(doutput_.get_data_handle()) = 1.0f;
        write_gradient();
    }
    return loss;
}

float Loss::forward(bool gradient) {
    if (kind_ == LossKind::kGraph) return graph_forward(gradient);
    for (auto& op : before_) op();
    stream_.wait();
    const auto n = static_cast<std::size_t>(batch_), z = static_cast<std::size_t>(width_);
    const float* out = static_cast<const float*>(output_.get_data_handle());
    float* dl = gradient && doutput_ ? static_cast<float*>(doutput_.get_data_handle()) : nullptr;
    const double divisor = reduction_ == LossReduction::kMean ? static_cast<double>(n) : 1.0;
    double total = 0;
    for (std::size_t b = 0; b < n; ++b) {
        const float* row = out + b * z;
        std::size_t best = 0;
        for (std::size_t j = 1; j < z; ++j) best = row[j] > row[best] ? j : best;
        predictions_[b] = static_cast<std::int32_t>(best);
        if (kind_ == LossKind::kSoftmaxCrossEntropy) {
            const double mx = row[best];
            double sum = 0;
            for (std::size_t j = 0; j < z; ++j) sum += std::exp(double(row[j]) - mx);
            if (labels_[b] < 0 || labels_[b] >= width_)
                throw std::out_of_range("label " + std::to_string(labels_[b]) + " of example " + std::to_string(b) +
                                        " is outside [0, " + std::to_string(width_) + ")");
            const auto label = static_cast<std::size_t>(labels_[b]);
            // q = (1 - E) one-hot + E / K sums to 1: -sum q_k log p_k = log(sum) - sum q_k (x_k - mx).
            const double spread = smoothing_ / double(z), top = 1.0 - smoothing_ + spread;
            double target_logit = (double(row[label]) - mx) * (top - spread);
            if (spread > 0.0)
                for (std::size_t j = 0; j < z; ++j) target_logit += spread * (double(row[j]) - mx);
            total += std::log(sum) - target_logit;
            if (dl != nullptr)
                for (std::size_t j = 0; j < z; ++j) {
                    const double p = std::exp(double(row[j]) - mx) / sum;
                    dl[b * z + j] = static_cast<float>((p - (j == label ? top : spread)) / divisor);
                }
            continue;
        }
        const float* t = targets_.data() + b * z;
        for (std::size_t j = 0; j < z; ++j) {
            if (!std::isfinite(t[j]))
                throw std::out_of_range("target " + std::to_string(j) + " of example " + std::to_string(b) +
                                        " is not finite");
            const double y = row[j];
            double g;
            if (kind_ == LossKind::kMeanSquaredError) {
                total += 0.5 * (y - t[j]) * (y - t[j]);
                g = y - t[j];
            } else {
                total += softplus(y) - y * t[j];
                g = 1.0 / (1.0 + std::exp(-y)) - t[j];
            }
            if (dl != nullptr) dl[b * z + j] = static_cast<float>(g / divisor);
        }
    }
    if (dl != nullptr) write_gradient();
    return static_cast<float>(total / divisor);
}

void Loss::set_gradient(std::span<const float> grad) {
    const auto size = kind_ == LossKind::kGraph ? std::size_t{1} : static_cast<std::size_t>(batch_ * width_);
    if (grad.size() != size || !doutput_) throw std::invalid_argument("Loss::set_gradient: wrong size or no gradient");
    std::copy(grad.begin(), grad.end(), static_cast<float*>(doutput_.get_data_handle()));
    write_gradient();
}

void Loss::write_gradient() {
    for (auto& op : after_) op();
}

void Loss::probabilities(std::span<float> out) const {
    const auto n = static_cast<std::size_t>(batch_), z = static_cast<std::size_t>(width_);
    if (out.size() != n * z)
        throw std::invalid_argument("Loss::probabilities: " + std::to_string(out.size()) + " floats for " +
                                    std::to_string(n) + " x " + std::to_string(z));
    if (n == 0) return;
    const float* lg = static_cast<const float*>(output_.get_data_handle());
    for (std::size_t b = 0; b < n; ++b) {
        const float* row = lg + b * z;
        if (kind_ == LossKind::kMeanSquaredError) {
            std::copy(row, row + z, out.begin() + static_cast<std::ptrdiff_t>(b * z));
        } else if (kind_ == LossKind::kSigmoidCrossEntropy) {
            for (std::size_t j = 0; j < z; ++j)
                out[b * z + j] = static_cast<float>(1.0 / (1.0 + std::exp(-double(row[j]))));
        } else {
            double mx = row[0];
            for (std::size_t j = 1; j < z; ++j) mx = std::max(mx, double(row[j]));
            double sum = 0;
            for (std::size_t j = 0; j < z; ++j) sum += std::exp(double(row[j]) - mx);
            for (std::size_t j = 0; j < z; ++j)
                out[b * z + j] = static_cast<float>(std::exp(double(row[j]) - mx) / sum);
        }
    }
}

}  // namespace psrun::nn
