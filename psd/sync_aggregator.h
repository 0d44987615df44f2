// Sync-mode gradient aggregation for one shard (TF SyncReplicas semantics): gradients tagged
// with the current step are summed until `replicas` have arrived, then averaged; sparse rows go
// to a sparse accumulator (TF's SparseConditionalAccumulator) holding only the step's rows. Also keeps the
// straggler statistics (which worker completed each step last, and by how much). Loop-thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "psd/row_frames.h"

namespace psrun::psd {

class SyncAggregator {
  public:
    // `row_widths`: the width of each sparse table (layout.tables order); `row_keyed`: which of
    // them are keyed by raw 64-bit ids (empty: none).
    SyncAggregator(std::size_t floats, std::uint32_t num_workers, std::uint32_t replicas, std::uint32_t report_every,
                   std::vector<std::uint32_t> row_widths = {}, const std::vector<bool>& row_keyed = {});

    std::uint32_t replicas() const { return replicas_; }
    void set_replicas(std::uint32_t replicas) { replicas_ = replicas; }  // a step completes at count() >= it
    std::uint32_t count() const { return count_; }
    bool contributed(std::uint32_t worker) const { return contributed_[worker]; }

    // Adds one worker's gradient (one span per own slice at `offsets`, and its sparse rows). Returns
    // true when `replicas` gradients are in: call average() (and average_rows()) then finish_step().
    bool add(std::uint32_t worker, const std::vector<std::span<const float>>& grads,
             const std::vector<std::size_t>& offsets, std::span<const RowSlice> rows = {});
    // The averaged gradient, one span per own slice (valid until the next add()).
    std::vector<std::span<const float>> average(const std::vector<std::span<const float>>& shape_like,
                                                const std::vector<std::size_t>& offsets);
    // The averaged sparse rows: per table with any, the union of the step's ids (ascending), each
    // row's sum over the replicas divided by the number of replicas, as the dense average does (a
    // replica that did not push a row counts as a zero gradient for it). Valid until the next add().
    std::vector<RowSlice> average_rows();
    std::size_t row_floats() const;  // sparse accumulator floats in use (bounded by one step's rows)
    // An exception left add() half-way: the step's sum may hold part of a gradient. Stays true.
    bool torn() const { return torn_; }
    // Clears the step; returns a straggler report every `report_every` completed steps.
    std::optional<std::string> finish_step(std::uint64_t completed_step);

  private:
    using Clock = std::chrono::steady_clock;
    struct RowSum {  // one table's sparse accumulator
        std::uint32_t width = 0;
        bool keyed = false;  // raw 64-bit ids (RowSlice::keys), else row ids (RowSlice::ids)
        std::unordered_map<std::uint64_t, std::uint32_t> at;  // row id -> position in ids/sums
        std::vector<std::uint64_t> ids;
        std::vector<float> sums;
        std::vector<std::uint32_t> sorted_ids;   // average_rows(): the ids ascending, and their means
        std::vector<std::uint64_t> sorted_keys;  // (keyed tables)
        std::vector<float> means;
    };
    std::vector<float> sum_;
    std::vector<RowSum> row_sums_;
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
    bool torn_ = false;  // see torn()
};

}  // namespace psrun::psd
