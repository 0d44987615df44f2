// Tells half-written state from untouched state after an exception: a TornGuard marks its flag
// for the length of a write, and only a write that returns (no exception leaving it) clears the
// mark again. Guards nest (an inner one restores the outer one's mark). Used by ShardState and
// SyncAggregator; psd/parameter_server.h says what an exception does with each outcome.
#pragma once

#include <exception>

namespace psrun::psd {

class TornGuard {
  public:
    explicit TornGuard(bool& torn) : torn_(torn), was_(torn), exceptions_(std::uncaught_exceptions()) { torn_ = true; }
    ~TornGuard() {
        if (std::uncaught_exceptions() == exceptions_) torn_ = was_;
    }
    TornGuard(const TornGuard&) = delete;
    TornGuard& operator=(const TornGuard&) = delete;

  private:
    bool& torn_;
    bool was_;
    int exceptions_;
};

}  // namespace psrun::psd
