// A count-min sketch of 64-bit ids: how often each id occurred, over- but never under-estimated
// (a collision can only add), in fixed memory. Two rows of `width` 16-bit counters (width a power
// of two), each saturating at 65535. With `age_after` N > 0 every counter is halved once N ids
// have been added since the last halving, so counts follow the recent traffic (TinyLFU's reset:
// Einziger, Friedman and Manes, "TinyLFU: A Highly Efficient Cache Admission Policy", 2017);
// with 0 they only grow.
//
// Memory: 4 x width bytes. Not thread-safe: owned by one RowIndex.
#pragma once

#include <cstdint>
#include <vector>

namespace psrun::psd {

class CountSketch {
  public:
    // `width` >= 1 is rounded up to a power of two. `seed` picks the hash.
    CountSketch(std::uint64_t width, std::uint64_t age_after, std::uint64_t seed);

    // Counts one occurrence of `id`; returns its estimate, this one included.
    std::uint32_t add(std::uint64_t id);
    // The estimate of `id`'s count, counting nothing.
    std::uint32_t estimate(std::uint64_t id) const;
    // Forgets every count.
    void clear();

    std::uint64_t width() const { return mask_ + 1; }
    std::uint64_t halvings() const { return halvings_; }

  private:
    std::uint64_t hash(std::uint64_t id) const;

    std::vector<std::uint16_t> counters_;  // row 0 then row 1
    std::uint64_t mask_ = 0;
    std::uint64_t age_after_ = 0;
    std::uint64_t seed_ = 0;
    std::uint64_t added_ = 0;  // since the last halving
    std::uint64_t halvings_ = 0;
};

}  // namespace psrun::psd
