// Sync-mode gradient aggregation for one shard (TF SyncReplicas semantics): gradients tagged
// with the current step are summed until `replicas` have arrived, then averaged. Also keeps the
// straggler statistics (which worker completed each step last, and by how much). Loop-thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

namespace psrun::psd {

class SyncAggregator {
public:
    SyncAggregator(std::size_t floats, std::uint32_t num_workers, std::uint32_t replicas,
                   std::uint32_t report_every);

    std::uint32_t replicas() const { return replicas_; }
    void set_replicas(std::uint32_t replicas) { replicas_ = replicas; }  // a step completes at count() >= it
    std::uint32_t count() const { return count_; }
    bool contributed(std::uint32_t worker) const { return contributed_[worker]; }

    // Adds one worker's gradient (one span per own slice at `offsets`). Returns true when
    // `replicas` gradients are in: call average() then finish_step().
    bool add(std::uint32_t worker, const std::vector<std::span<const float>>& grads,
             const std::vector<std::size_t>& offsets);
    // The averaged gradient, one span per own slice (valid until the next add()).
    std::vector<std::span<const float>> average(const std::vector<std::span<const float>>& shape_like,
                                                const std::vector<std::size_t>& offsets);
    // Clears the step; returns a straggler report every `report_every` completed steps.
    std::optional<std::string> finish_step(std::uint64_t completed_step);

private:
    using Clock = std::chrono::steady_clock;
    std::vector<float> sum_;
    std::vector<bool> contributed_;
    std::uint32_t replicas_;
    std::uint32_t report_every_;
    std::uint32_t count_ = 0;
    Clock::time_point first_{};
    std::uint32_t last_worker_ = 0;
    double last_lag_ms_ = 0;
    // Straggler window.
    std::vector<std::uint32_t> last_counts_;
    double lag_sum_ms_ = 0, lag_max_ms_ = 0;
    std::uint32_t window_steps_ = 0;
};

}  // namespace psrun::psd
