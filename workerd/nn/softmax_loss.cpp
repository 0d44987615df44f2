#include "workerd/nn/softmax_loss.h"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "workerd/nn/layer.h"

namespace psrun::nn {

using dnnl::memory;
using Dt = memory::data_type;

namespace {

void add_reorder(std::vector<std::function<void()>>& ops, const dnnl::stream& stream,
                 const memory& from, const memory& to) {
    dnnl::reorder r(from, to);
    ops.push_back([r, stream, from, to]() mutable {
        r.execute(stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}});
    });
}

}  // namespace

SoftmaxLoss::SoftmaxLoss(const dnnl::engine& engine, const dnnl::stream& stream,
                         const memory& logits, const memory& diff_logits, LossReduction reduction)
    : stream_(stream), reduction_(reduction) {
    const auto dims = logits.get_desc().dims();
    batch_ = dims.at(0);
    classes_ = dims.at(1);
    for (std::size_t i = 2; i < dims.size(); ++i) classes_ *= dims[i];
    const memory::desc plain(dims, Dt::f32, plain_tag(static_cast<int>(dims.size())));
    if (logits.get_desc() == plain) {
        logits_ = logits;
    } else {
        logits_ = memory(plain, engine);
        add_reorder(before_, stream_, logits, logits_);
    }
    if (diff_logits) {
        if (diff_logits.get_desc() == plain) {
            dlogits_ = diff_logits;
        } else {
            dlogits_ = memory(plain, engine);
            add_reorder(after_, stream_, dlogits_, diff_logits);
        }
    }
    predictions_.assign(static_cast<std::size_t>(batch_), 0);
}

float SoftmaxLoss::forward(std::span<const std::int32_t> labels, bool gradient) {
    for (auto& op : before_) op();
    const auto n = static_cast<std::size_t>(batch_), z = static_cast<std::size_t>(classes_);
    const float* lg = static_cast<const float*>(logits_.get_data_handle());
    float* dl = gradient ? static_cast<float*>(dlogits_.get_data_handle()) : nullptr;
    const double divisor = reduction_ == LossReduction::kMean ? static_cast<double>(n) : 1.0;
    double total = 0;
    for (std::size_t b = 0; b < n; ++b) {
        const float* row = lg + b * z;
        std::size_t best = 0;
        for (std::size_t j = 1; j < z; ++j) best = row[j] > row[best] ? j : best;
        const double mx = row[best];
        double sum = 0;
        for (std::size_t j = 0; j < z; ++j) sum += std::exp(double(row[j]) - mx);
        if (labels[b] < 0 || labels[b] >= classes_)
            throw std::out_of_range("label " + std::to_string(labels[b]) + " of example " + std::to_string(b) +
                                    " is outside [0, " + std::to_string(classes_) + ")");
        const auto label = static_cast<std::size_t>(labels[b]);
        total += std::log(sum) - (double(row[label]) - mx);
        predictions_[b] = static_cast<std::int32_t>(best);
        if (dl != nullptr) {
            for (std::size_t j = 0; j < z; ++j) {
                const double p = std::exp(double(row[j]) - mx) / sum;
                dl[b * z + j] = static_cast<float>((p - (j == label ? 1.0 : 0.0)) / divisor);
            }
        }
    }
    if (dl != nullptr)
        for (auto& op : after_) op();
    return static_cast<float>(total / divisor);
}

void SoftmaxLoss::probabilities(std::span<float> out) const {
    const auto n = static_cast<std::size_t>(batch_), z = static_cast<std::size_t>(classes_);
    if (out.size() != n * z)
        throw std::invalid_argument("SoftmaxLoss::probabilities: " + std::to_string(out.size()) + " floats for " +
                                    std::to_string(n) + " x " + std::to_string(z));
    // logits_ holds the plain f32 copy forward() made (or is the last layer's own plain dst).
    const float* lg = static_cast<const float*>(logits_.get_data_handle());
    for (std::size_t b = 0; b < n; ++b) {
        const float* row = lg + b * z;
        double mx = row[0];
        for (std::size_t j = 1; j < z; ++j) mx = std::max(mx, double(row[j]));
        double sum = 0;
        for (std::size_t j = 0; j < z; ++j) sum += std::exp(double(row[j]) - mx);
        for (std::size_t j = 0; j < z; ++j) out[b * z + j] = static_cast<float>(std::exp(double(row[j]) - mx) / sum);
    }
}

}  // namespace psrun::nn
