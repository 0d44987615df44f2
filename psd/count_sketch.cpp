#include "psd/count_sketch.h"

#include <algorithm>
#include <bit>

namespace psrun::psd {

CountSketch::CountSketch(std::uint64_t width, std::uint64_t age_after, std::uint64_t seed)
    : age_after_(age_after), seed_(seed) {
    const std::uint64_t w = std::bit_ceil(std::max<std::uint64_t>(width, 1));
    counters_.assign(2 * w, 0);
    mask_ = w - 1;
}

std::uint64_t CountSketch::hash(std::uint64_t id) const {  // splitmix64's finaliser
    std::uint64_t x = id ^ seed_;
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

std::uint32_t CountSketch::add(std::uint64_t id) {
    const std::uint64_t h = hash(id);
    std::uint16_t& a = counters_[h & mask_];
    std::uint16_t& b = counters_[(mask_ + 1) + ((h >> 32) & mask_)];
    if (a < 0xFFFF) ++a;
    if (b < 0xFFFF) ++b;
    const std::uint32_t count = std::min(a, b);
    if (age_after_ > 0 && ++added_ >= age_after_) {
        for (std::uint16_t& c : counters_) c = static_cast<std::uint16_t>(c >> 1);
        added_ = 0;
        ++halvings_;
    }
    return count;
}

std::uint32_t CountSketch::estimate(std::uint64_t id) const {
    const std::uint64_t h = hash(id);
    return std::min(counters_[h & mask_], counters_[(mask_ + 1) + ((h >> 32) & mask_)]);
}

void CountSketch::clear() {
    std::fill(counters_.begin(), counters_.end(), std::uint16_t{0});
    added_ = 0;
}

}  // namespace psrun::psd
