#include "psd/join_slots.h"

#include <stdexcept>

namespace psrun::psd {

JoinSlots::JoinSlots(std::uint32_t num_workers, std::uint32_t max_workers, Clock::duration reservation)
    : num_(num_workers), max_(max_workers), reservation_(reservation) {
    if (num_workers == 0 || max_workers < num_workers || reservation <= Clock::duration::zero())
        throw std::invalid_argument("JoinSlots needs 1 <= num_workers <= max_workers and a positive reservation");
}

bool JoinSlots::is_reserved(std::uint32_t index, Clock::time_point now) const {
    const auto it = reserved_.find(index);
    return it != reserved_.end() && now - it->second < reservation_;
}

std::optional<std::uint32_t> JoinSlots::assign(const WorkerTable& table,
                                               const std::function<bool(std::uint32_t)>& dropped,
                                               Clock::time_point now) {
    std::erase_if(reserved_, [&](const auto& r) { return now - r.second >= reservation_; });
    std::optional<std::uint32_t> slot;
    const std::uint32_t end = std::min(max_, table.size());
    for (std::uint32_t i = num_; i < end && !slot; ++i)
        if (!table.is_attached(i) && !reserved_.contains(i)) slot = i;
    for (std::uint32_t i = 0; i < end && !slot; ++i)
        if (table.is_dead(i) && dropped && dropped(i) && !reserved_.contains(i)) slot = i;
    if (!slot) return std::nullopt;
    reserved_[*slot] = now;
    ++handed_out_;
    return slot;
}

}  // namespace psrun::psd
