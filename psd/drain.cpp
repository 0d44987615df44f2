#include "psd/drain.h"

#include "common/exit_codes.h"
#include "common/result.h"

namespace psrun::psd {

void Drain::begin(int signal, Clock::time_point now) {
    if (active_) return;
    active_ = true;
    signal_ = signal;
    since_ = now;
}

double Drain::seconds_since_begin(Clock::time_point now) const {
    return active_ ? std::chrono::duration<double>(now - since_).count() : 0.0;
}

int Drain::exit_code(std::uint64_t shard_step) const {
    return saved_step_ && *saved_step_ == shard_step ? kExitPreempted : kExitFailure;
}

void Drain::reset() {
    active_ = false;
    worker_preempted_ = false;
    signal_ = 0;
    saved_step_.reset();
}

}  // namespace psrun::psd
