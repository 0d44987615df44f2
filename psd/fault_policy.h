// How one psd degrades under faults (issue 6; docs/reliability.md):
//  - sync mode, a worker declared dead (silent for --worker-timeout): a step needs the
//    configured --replicas-to-aggregate gradients, lowered to the number of workers still
//    running, so the survivors' steps complete instead of hanging (backup workers cover a
//    death first: the count only drops when fewer workers than replicas are left);
//  - non-finite gradients: each is rejected before it touches the weights and counted; after
//    --max-bad-grads of them (0: unlimited) the run is aborted: psd answers every request with
//    an ERROR of code kAborted naming the reason, and exits 1 once every running worker has
//    been told (or after a grace period).
// Pure bookkeeping, loop-thread only.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace psrun::psd {

class FaultPolicy {
  public:
    using Clock = std::chrono::steady_clock;

    FaultPolicy(std::uint32_t num_workers, std::uint64_t max_bad_grads);

    // Gradients a sync step needs when `gone` of the workers are dead or done (at least 1).
    static std::uint32_t replicas_needed(std::uint32_t configured, std::uint32_t num_workers, std::uint32_t gone);

    // Counts one rejected gradient; returns true when it exhausts --max-bad-grads (the run is
    // then aborted with a reason naming the count and this gradient).
    bool bad_gradient(std::uint32_t worker, std::uint64_t step, const std::string& why);
    std::uint64_t bad_gradients() const { return bad_; }
    std::uint64_t max_bad_grads() const { return max_bad_; }

    // Aborts the run for another reason (e.g. a model dir this psd does not share with the
    // chief); psd then exits with `exit_code`. No-op when already aborted.
    void abort(std::string reason, int exit_code);
    bool aborted() const { return aborted_; }
    int exit_code() const { return exit_code_; }
    const std::string& abort_reason() const { return reason_; }
    Clock::time_point aborted_at() const { return aborted_at_; }
    // Worker `index` has received the abort error.
    void told(std::uint32_t index) { told_[index] = true; }
    bool was_told(std::uint32_t index) const { return told_[index]; }

  private:
    std::uint64_t max_bad_;
    std::uint64_t bad_ = 0;
    bool aborted_ = false;
    std::string reason_;
    int exit_code_ = 1;
    Clock::time_point aborted_at_{};
    std::vector<bool> told_;
};

}  // namespace psrun::psd
