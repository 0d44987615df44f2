// Synthetic compute for scale tests (docs/scaling.md): the time a step "computes" is a constant
// (--synthetic-compute-ms T) plus, optionally, a random extra delay (--synthetic-compute-jitter),
// so that workers do not stay in phase the way identical sleeps keep them.
//   exp:MEAN_MS  an exponential extra delay with mean MEAN_MS: step time T + X, X exponential with
//                rate 1/MEAN_MS (step mean T + MEAN_MS, standard deviation MEAN_MS)
//   none         no extra delay (the default)
// The draws come from a generator seeded by (--seed, worker index), so a run repeats its delays
// and no two workers share a sequence.
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"
#include "common/rng.h"

namespace psrun::worker {

struct ComputeJitter {
    double exp_mean_ms = 0;  // 0: none
    bool enabled() const { return exp_mean_ms > 0; }
};

// "none" or "exp:MEAN_MS" with 0 < MEAN_MS <= 3600000; kInvalidArgument naming the problem otherwise.
[[nodiscard]] Result<ComputeJitter> parse_compute_jitter(const std::string& spec);

// The spec text of `jitter` ("none" or "exp:MEAN_MS"), for logs.
std::string to_string(const ComputeJitter& jitter);

class SyntheticCompute {
  public:
    SyntheticCompute(double base_ms, ComputeJitter jitter, std::uint64_t seed, std::uint32_t worker);

    // The next step's duration in ms: base plus one draw of the jitter.
    double next_ms();
    // Sleeps for next_ms().
    void run();

  private:
    double base_ms_;
    ComputeJitter jitter_;
    Rng rng_;
};

}  // namespace psrun::worker
