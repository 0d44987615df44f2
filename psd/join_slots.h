// psd 0's hand-out of worker indices to workers that join a running job (JOIN, `psrun join`,
// docs/reliability.md "Workers that join"). No I/O; loop-thread only.
//
// Which slot a joiner gets: the lowest index from num_workers up to max_workers that no worker
// ever attached to and that is not reserved; when every such slot is taken, the lowest slot of a
// worker dropped for good (the caller says which: dead, not the chief, --min-workers on) that is
// not reserved. A slot handed out is reserved until the joiner's HELLO arrives (attached()) or
// for `reservation` (a joiner that died between JOIN and HELLO frees it again).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <optional>

#include "psd/worker_table.h"

namespace psrun::psd {

class JoinSlots {
  public:
    // REQUIRES: max_workers >= num_workers >= 1; reservation > 0.
    JoinSlots(std::uint32_t num_workers, std::uint32_t max_workers, Clock::duration reservation);

    // True when psd was started with room for joiners (--max-workers above --num-workers).
    bool enabled() const { return max_ > num_; }
    // The slot for a new joiner (reserved from `now`), or nullopt when there is none. `dropped(i)`:
    // slot i belongs to a worker dropped for good and may be handed out again.
    std::optional<std::uint32_t> assign(const WorkerTable& table, const std::function<bool(std::uint32_t)>& dropped,
                                        Clock::time_point now);
    void attached(std::uint32_t index) { reserved_.erase(index); }  // its HELLO came
    // Slot `index` was handed out and its joiner's HELLO has not come yet (its reservation may have
    // run out, but no later assign() has handed out a slot since).
    bool pending(std::uint32_t index) const { return reserved_.contains(index); }
    bool is_reserved(std::uint32_t index, Clock::time_point now) const;
    std::uint32_t handed_out() const { return handed_out_; }  // assign() calls that found a slot

  private:
    std::uint32_t num_;
    std::uint32_t max_;
    Clock::duration reservation_;
    std::map<std::uint32_t, Clock::time_point> reserved_;  // slot -> when it was handed out
    std::uint32_t handed_out_ = 0;
};

}  // namespace psrun::psd
