// A worker's step times: from the end of one step to the end of the next (computing, the exchange
// with psd and the hooks, a checkpoint's wait included), so that a stall shows as a long step; the
// step loop adds every step but a worker's first (start-up) and the last one's hooks. Kept
// in a fixed log-scale histogram (8 buckets per doubling: a quantile is within 4.4% of the true
// value) plus the exact longest step, so a run of any length costs 2.6 KB. Not thread-safe.
#pragma once

#include <array>
#include <cstdint>
#include <string>

namespace psrun::worker {

class StepTimes {
  public:
    void add(double seconds, std::uint64_t global_step);
    std::uint64_t count() const { return count_; }
    // Seconds below which a fraction `q` in [0, 1] of the steps took (the middle of its bucket); 0
    // when no step was added.
    double quantile(double q) const;
    double longest() const { return longest_; }                   // seconds, exact
    std::uint64_t longest_step() const { return longest_step_; }  // the global step it ended at
    // "median 12.1 ms, p99 14.0 ms, longest 1534 ms (global step 300)"; "no step" when empty.
    std::string text() const;

  private:
    static constexpr int kPerDoubling = 8;
    static constexpr int kBuckets = 40 * kPerDoubling + 1;  // bucket 0: under 1 us; up to 2^40 us
    std::array<std::uint64_t, kBuckets> buckets_{};
    std::uint64_t count_ = 0;
    double longest_ = 0;
    std::uint64_t longest_step_ = 0;
};

}  // namespace psrun::worker
