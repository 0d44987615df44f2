#include "psd/weight_average.h"

#include <cstring>

namespace psrun::psd {

void WeightAverage::reset(float decay, const std::vector<std::span<const float>>& params) {
    decay_ = decay;
    started_ = false;
    values_.clear();
    if (!enabled()) return;
    values_.reserve(params.size());
    for (auto p : params) values_.emplace_back(p.begin(), p.end());
}

void WeightAverage::retune(float decay, const std::vector<std::span<const float>>& params) {
    if (enabled() && decay > 0.0f) decay_ = decay;
    else reset(decay, params);
}

void WeightAverage::set(float decay, std::vector<std::vector<float>> values) {
    decay_ = decay;
    values_ = std::move(values);
    started_ = enabled();
    if (!enabled()) values_.clear();
}

std::span<const float> WeightAverage::slice(std::size_t k) const {
    if (k >= values_.size()) return {};
    return values_[k];
}

std::size_t WeightAverage::floats() const {
    std::size_t n = 0;
    for (const auto& v : values_) n += v.size();
    return n;
}

void WeightAverage::update_range(std::size_t k, std::span<const float> params, std::size_t begin, std::size_t end) {
    if (!enabled() || begin >= end) return;
    float* ema = values_[k].data();
    if (!started_) {
        std::memcpy(ema + begin, params.data() + begin, (end - begin) * sizeof(float));
        return;
    }
    // ema += (1 - D) (p - ema): one rounding fewer than D ema + (1 - D) p, and exact when p == ema.
    const float rate = 1.0f - decay_;
    const float* p = params.data();
    for (std::size_t i = begin; i < end; ++i) ema[i] += rate * (p[i] - ema[i]);
}

}  // namespace psrun::psd
