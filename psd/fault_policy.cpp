#include "psd/fault_policy.h"

#include <fmt/format.h>

#include <algorithm>

namespace psrun::psd {

FaultPolicy::FaultPolicy(std::uint32_t num_workers, std::uint64_t max_bad_grads)
    : max_bad_(max_bad_grads), told_(num_workers, false) {}

std::uint32_t FaultPolicy::replicas_needed(std::uint32_t configured, std::uint32_t num_workers, std::uint32_t gone) {
    const std::uint32_t running = num_workers > gone ? num_workers - gone : 0;
    return std::max<std::uint32_t>(1, std::min(configured, running));
}

bool FaultPolicy::bad_gradient(std::uint32_t worker, std::uint64_t step, const std::string& why) {
    ++bad_;
    if (aborted_ || max_bad_ == 0 || bad_ < max_bad_) return false;
    aborted_ = true;
    aborted_at_ = Clock::now();
    reason_ = fmt::format(
        "run stopped: {} non-finite gradients rejected (--max-bad-grads {}), the last from worker {} at step {} "
        "({}); no NaN/Inf ever reached the weights or a checkpoint: fix the cause (learning rate, data, "
        "hardware) and resume from the last checkpoint",
        bad_, max_bad_, worker, step, why);
    return true;
}

void FaultPolicy::abort(std::string reason, int exit_code) {
    if (aborted_) return;
    aborted_ = true;
    aborted_at_ = Clock::now();
    reason_ = std::move(reason);
    exit_code_ = exit_code;
}

}  // namespace psrun::psd
