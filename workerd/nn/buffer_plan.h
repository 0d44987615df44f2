// Places the engine's buffers (activations, gradients of activations, temporaries) in one arena
// by lifetime: two buffers share bytes only when no step of the training sequence uses both.
// Pure offset arithmetic, no oneDNN: network_build.cpp turns offsets into memories.
//
// Steps are the positions of one training step's work in order (network_build.cpp numbers
// them: forward of kernel k is step k, the loss K, backward of kernel k is 2K - k). A buffer
// lives over the inclusive step interval [first, last].
//
// Placement is online, in the order buffers are added (the engine needs each address when a
// kernel builds, before later kernels exist): best fit, the smallest gap between the buffers
// already placed whose intervals overlap the new one's, else the lowest offset above them all.
// Once every buffer is known, offline_offsets() places them again in a few orders (largest first,
// busiest steps first, longest-lived first); the engine builds a second time with the best one's
// offsets (preset) where they need fewer bytes.
// Offsets are multiples of kAlignment bytes. Not thread-safe.
#pragma once

#include <cstddef>
#include <limits>
#include <utility>
#include <vector>

namespace psrun::nn {

class BufferPlan {
  public:
    static constexpr std::size_t kAlignment = 64;
    // A last step no step reaches: the buffer is read after the training step (the model output).
    static constexpr int kForever = std::numeric_limits<int>::max();
    static constexpr std::size_t kNone = std::numeric_limits<std::size_t>::max();

    struct Buffer {
        std::size_t offset = 0;
        std::size_t bytes = 0;  // as asked (the arena reserves it rounded up to kAlignment)
        int first = 0;
        int last = 0;
    };

    // Places `bytes` (> 0) live over [first, last] (first <= last; std::invalid_argument
    // otherwise). Returns the buffer's id (0, 1, ... in order of placement).
    std::size_t place(std::size_t bytes, int first, int last);
    const Buffer& buffer(std::size_t id) const { return buffers_.at(id); }
    std::size_t size() const { return buffers_.size(); }

    // The buffer live at step `step` whose bytes contain arena offset `at`, or kNone (at most
    // one can: buffers live at the same step never share bytes).
    std::size_t find(std::size_t at, int step) const;
    // Makes buffer `id` live until `last` too (a view of it is read later). False, and nothing
    // changes, when a buffer placed in the same bytes is live in the added steps.
    bool extend(std::size_t id, int last);

    // Every buffer placed so far placed again over its interval as it is now (extend() included),
    // each best fit among those placed before it, in each of three orders (largest first; those
    // live at the busiest steps first; the longest-lived first): the offsets by id of the order
    // that needs the fewest bytes, and in `bytes` those bytes (with every buffer known, this
    // usually reaches peak_live_bytes()).
    std::vector<std::size_t> offline_offsets(std::size_t& bytes) const;
    // Offsets for the buffers placed from now on, by id (offline_offsets() of a plan that had the
    // same buffers): place() takes its buffer's unless that would overlap a buffer live with it
    // (then best fit as without).
    void preset(std::vector<std::size_t> offsets) { preset_ = std::move(offsets); }

    // Bytes the arena needs: the highest end of a placed buffer (aligned).
    std::size_t arena_bytes() const { return arena_bytes_; }
    // The sum of all buffers' sizes (aligned): what one buffer per value would take.
    std::size_t total_bytes() const { return total_bytes_; }
    // The most bytes live at one step (aligned): no placement can need fewer than this.
    std::size_t peak_live_bytes() const;

    static std::size_t aligned(std::size_t bytes) { return (bytes + kAlignment - 1) / kAlignment * kAlignment; }

  private:
    static bool overlap_in_time(const Buffer& a, int first, int last) { return a.first <= last && first <= a.last; }

    // The offset of the smallest gap of at least `need` bytes among `taken` ((begin, end) byte
    // ranges, sorted), else the end of the highest.
    // Offsets by id placing the buffers in `order` (ids), each best fit; `bytes`: the arena needed.
    std::vector<std::size_t> place_in_order(const std::vector<std::size_t>& order, std::size_t& bytes) const;
    // Per buffer, the most bytes live at one step of its interval.
    std::vector<std::size_t> peak_live_over_interval() const;
    // (step, bytes live from it to the next entry's step), by step: each step at which a buffer
    // starts or one ended the step before.
    std::vector<std::pair<long long, std::size_t>> live_segments() const;

    static std::size_t best_fit(const std::vector<std::pair<std::size_t, std::size_t>>& taken, std::size_t need);

    std::vector<Buffer> buffers_;
    std::vector<std::size_t> preset_;
    std::size_t arena_bytes_ = 0;
    std::size_t total_bytes_ = 0;
};

}  // namespace psrun::nn
