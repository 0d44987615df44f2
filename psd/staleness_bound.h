// Bounded staleness for asynchronous training (psd --max-staleness S, docs/protocol.md "Bounded
// staleness"): stale synchronous parallel (Ho et al., NIPS 2013; ps-lite's "bounded delay"). A
// worker's clock is the number of its gradients this shard applied. Its reply waits while its
// clock is more than S ahead of the slowest counted worker's, so no worker computes on
// parameters that miss more than S of any other worker's gradients (beyond the one in flight).
// Gradients are still applied one by one as they come, never averaged or dropped.
//
// Counted workers: attached, not done, not dead (the caller says which, set_members()). A worker
// that starts counting (it attaches late, or speaks again after it was declared dead) joins at
// the slowest counted worker's clock when it is behind it: joining never holds the others back
// for the gradients it did not send. A worker that stops counting holds nobody back.
// S = 0 is lock-step: no worker's (k+1)-th gradient is applied before every counted worker's
// k-th (the updates stay asynchronous, one per gradient).
//
// Every shard gets every push of every worker (common/ps_client.h: one message per shard per
// exchange), so the shards' clocks agree and each shard holding a reply is enough. Pure (no
// sockets, no time) and loop-thread only.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

namespace psrun::psd {

class StalenessBound {
  public:
    // REQUIRES: num_workers >= 1.
    StalenessBound(std::uint32_t num_workers, std::uint32_t bound);

    std::uint32_t bound() const { return bound_; }
    // Which workers count now, one flag per worker (true: attached, not done, not dead). A
    // worker that was not counted and is now joins at the slowest clock of those counted before.
    void set_members(const std::vector<bool>& counted);
    // One more of `worker`'s gradients was applied.
    void applied(std::uint32_t worker) { ++clocks_[worker]; }
    // Whether `worker`'s reply must wait: it counts and its clock is more than bound() ahead of
    // the slowest counted worker.
    bool must_wait(std::uint32_t worker) const;

    std::uint64_t clock(std::uint32_t worker) const { return clocks_[worker]; }
    // The slowest counted worker's clock; nullopt when none counts.
    std::optional<std::uint64_t> slowest() const;
    // The fastest counted clock minus the slowest (0 when none counts).
    std::uint64_t spread() const;

  private:
    std::uint32_t bound_;
    std::vector<std::uint64_t> clocks_;
    std::vector<bool> counted_;
};

}  // namespace psrun::psd
