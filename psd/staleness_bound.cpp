#include "psd/staleness_bound.h"

#include <algorithm>
#include <stdexcept>

namespace psrun::psd {

StalenessBound::StalenessBound(std::uint32_t num_workers, std::uint32_t bound)
    : bound_(bound), clocks_(num_workers, 0), counted_(num_workers, false) {
    if (num_workers == 0) throw std::invalid_argument("StalenessBound needs at least one worker");
}

void StalenessBound::set_members(const std::vector<bool>& counted) {
    if (counted.size() != counted_.size()) throw std::invalid_argument("StalenessBound: one flag per worker");
    const auto before = slowest();
    for (std::size_t w = 0; w < counted.size(); ++w) {
        if (counted[w] && !counted_[w] && before) clocks_[w] = std::max(clocks_[w], *before);
        counted_[w] = counted[w];
    }
}

std::optional<std::uint64_t> StalenessBound::slowest() const {
    std::optional<std::uint64_t> least;
    for (std::size_t w = 0; w < clocks_.size(); ++w)
        if (counted_[w] && (!least || clocks_[w] < *least)) least = clocks_[w];
    return least;
}

std::uint64_t StalenessBound::spread() const {
    const auto least = slowest();
    if (!least) return 0;
    std::uint64_t most = *least;
    for (std::size_t w = 0; w < clocks_.size(); ++w)
        if (counted_[w]) most = std::max(most, clocks_[w]);
    return most - *least;
}

bool StalenessBound::must_wait(std::uint32_t worker) const {
    if (!counted_[worker]) return false;
    const auto least = slowest();
    return least && clocks_[worker] > *least + bound_;
}

}  // namespace psrun::psd
