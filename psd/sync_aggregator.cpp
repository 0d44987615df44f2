#include "psd/sync_aggregator.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace psrun::psd {

SyncAggregator::SyncAggregator(std::size_t floats, std::uint32_t num_workers, std::uint32_t replicas,
                               std::uint32_t report_every)
    : sum_(floats, 0.0f),
      contributed_(num_workers, false),
      replicas_(replicas),
      report_every_(report_every),
      last_counts_(num_workers, 0) {}

bool SyncAggregator::add(std::uint32_t worker, const std::vector<std::span<const float>>& grads,
                         const std::vector<std::size_t>& offsets) {
    const auto now = Clock::now();
    for (std::size_t k = 0; k < grads.size(); ++k) {
        float* __restrict dst = sum_.data() + offsets[k];
        const float* __restrict src = grads[k].data();
        const std::size_t n = grads[k].size();
        if (count_ == 0) std::memcpy(dst, src, n * sizeof(float));
        else
            for (std::size_t i = 0; i < n; ++i) dst[i] += src[i];
    }
    if (count_ == 0) first_ = now;
    contributed_[worker] = true;
    last_worker_ = worker;
    last_lag_ms_ = std::chrono::duration<double, std::milli>(now - first_).count();
    return ++count_ >= replicas_;
}

std::vector<std::span<const float>> SyncAggregator::average(const std::vector<std::span<const float>>& shape_like,
                                                            const std::vector<std::size_t>& offsets) {
    const float scale = 1.0f / static_cast<float>(count_);
    for (auto& v : sum_) v *= scale;
    std::vector<std::span<const float>> out;
    for (std::size_t k = 0; k < shape_like.size(); ++k)
        out.emplace_back(sum_.data() + offsets[k], shape_like[k].size());
    return out;
}

std::optional<std::string> SyncAggregator::finish_step(std::uint64_t completed_step) {
    ++last_counts_[last_worker_];
    lag_sum_ms_ += last_lag_ms_;
    lag_max_ms_ = std::max(lag_max_ms_, last_lag_ms_);
    ++window_steps_;
    count_ = 0;
    std::fill(contributed_.begin(), contributed_.end(), false);
    if (report_every_ == 0 || window_steps_ < report_every_) return std::nullopt;
    const auto slowest = static_cast<std::uint32_t>(
        std::max_element(last_counts_.begin(), last_counts_.end()) - last_counts_.begin());
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "stragglers up to step %llu: worker %u completed %u of the last %u steps, "
                  "last gradient %.2f ms after the first on average (max %.2f ms)",
                  static_cast<unsigned long long>(completed_step), slowest, last_counts_[slowest],
                  window_steps_, lag_sum_ms_ / window_steps_, lag_max_ms_);
    std::fill(last_counts_.begin(), last_counts_.end(), 0);
    lag_sum_ms_ = lag_max_ms_ = 0;
    window_steps_ = 0;
    return std::string(buf);
}

}  // namespace psrun::psd
