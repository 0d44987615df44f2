#include "psd/sync_aggregator.h"

#include "psd/torn_guard.h"

#include <algorithm>
#include <cstdio>
#include <cstring>

namespace psrun::psd {

SyncAggregator::SyncAggregator(std::size_t floats, std::uint32_t num_workers, std::uint32_t replicas,
                               std::uint32_t report_every, std::vector<std::uint32_t> row_widths,
                               const std::vector<bool>& row_keyed)
    : sum_(floats, 0.0f),
      row_sums_(row_widths.size()),
      contributed_(num_workers, false),
      replicas_(replicas),
      report_every_(report_every),
      last_counts_(num_workers, 0) {
    for (std::size_t t = 0; t < row_widths.size(); ++t) {
        row_sums_[t].width = row_widths[t];
        row_sums_[t].keyed = t < row_keyed.size() && row_keyed[t];
    }
}

bool SyncAggregator::add(std::uint32_t worker, const std::vector<std::span<const float>>& grads,
                         const std::vector<std::size_t>& offsets, std::span<const RowSlice> rows) {
    const TornGuard guard(torn_);
    const auto now = Clock::now();
    for (const auto& r : rows) {
        auto& acc = row_sums_[r.table];
        const std::size_t w = acc.width;
        for (std::size_t i = 0; i < r.size(); ++i) {
            const std::uint64_t id = acc.keyed ? r.keys[i] : r.ids[i];
            const auto [it, fresh] = acc.at.try_emplace(id, static_cast<std::uint32_t>(acc.ids.size()));
            const float* src = r.values.data() + i * w;
            if (fresh) {
                acc.ids.push_back(id);
                acc.sums.insert(acc.sums.end(), src, src + w);
                continue;
            }
            float* dst = acc.sums.data() + static_cast<std::size_t>(it->second) * w;
            for (std::size_t c = 0; c < w; ++c) dst[c] += src[c];
        }
    }
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

std::vector<RowSlice> SyncAggregator::average_rows() {
    std::vector<RowSlice> out;
    const float scale = 1.0f / static_cast<float>(count_);
    for (std::uint32_t t = 0; t < row_sums_.size(); ++t) {
        auto& acc = row_sums_[t];
        if (acc.ids.empty()) continue;
        const std::size_t w = acc.width;
        std::vector<std::uint32_t> order(acc.ids.size());
        for (std::uint32_t i = 0; i < order.size(); ++i) order[i] = i;
        std::sort(order.begin(), order.end(),
                  [&](std::uint32_t a, std::uint32_t b) { return acc.ids[a] < acc.ids[b]; });
        acc.sorted_ids.resize(acc.keyed ? 0 : order.size());
        acc.sorted_keys.resize(acc.keyed ? order.size() : 0);
        acc.means.resize(order.size() * w);
        for (std::size_t i = 0; i < order.size(); ++i) {
            if (acc.keyed) acc.sorted_keys[i] = acc.ids[order[i]];
            else acc.sorted_ids[i] = static_cast<std::uint32_t>(acc.ids[order[i]]);
            const float* src = acc.sums.data() + static_cast<std::size_t>(order[i]) * w;
            for (std::size_t c = 0; c < w; ++c) acc.means[i * w + c] = src[c] * scale;
        }
        out.push_back(RowSlice{t, acc.sorted_ids, acc.means, acc.sorted_keys});
    }
    return out;
}

std::size_t SyncAggregator::row_floats() const {
    std::size_t n = 0;
    for (const auto& acc : row_sums_) n += acc.sums.size();
    return n;
}

std::optional<std::string> SyncAggregator::finish_step(std::uint64_t completed_step) {
    for (auto& acc : row_sums_) {
        acc.at.clear();
        acc.ids.clear();
        acc.sums.clear();
    }
    ++last_counts_[last_worker_];
    lag_sum_ms_ += last_lag_ms_;
    lag_max_ms_ = std::max(lag_max_ms_, last_lag_ms_);
    ++window_steps_;
    count_ = 0;
    std::fill(contributed_.begin(), contributed_.end(), false);
    if (report_every_ == 0 || window_steps_ < report_every_) return std::nullopt;
    const auto slowest =
        static_cast<std::uint32_t>(std::max_element(last_counts_.begin(), last_counts_.end()) - last_counts_.begin());
    char buf[256];
    std::snprintf(buf, sizeof buf,
                  "stragglers up to step %llu: worker %u completed %u of the last %u steps, "
                  "last gradient %.2f ms after the first on average (max %.2f ms)",
                  static_cast<unsigned long long>(completed_step), slowest, last_counts_[slowest], window_steps_,
                  lag_sum_ms_ / window_steps_, lag_max_ms_);
    std::fill(last_counts_.begin(), last_counts_.end(), 0);
    lag_sum_ms_ = lag_max_ms_ = 0;
    window_steps_ = 0;
    return std::string(buf);
}

}  // namespace psrun::psd
