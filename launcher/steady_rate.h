// The aggregate rate of a training run from its chief's metrics.jsonl, between two steps: what
// `psrun bench cluster` reports for the cluster (launcher/cmd_bench_cluster.h).
#pragma once

#include <cstdint>
#include <string>

#include "common/result.h"

namespace psrun::launcher {

struct SteadyRate {
    std::int64_t first_step = 0, last_step = 0;  // global steps of the two records used
    double seconds = 0;                          // wall time between them
    double images_per_sec = 0;                   // (last - first) * batch / seconds
};

// The throughput between the first progress record (one with "images_per_sec") of step >=
// from_step and the last one of step < before_step in a chief's metrics.jsonl. kNotFound when
// fewer than two such records exist (too few steps for the warm-up and the log interval).
[[nodiscard]] Result<SteadyRate> steady_rate_from_metrics(const std::string& metrics_path, int batch_size,
                                                          std::int64_t from_step, std::int64_t before_step);

}  // namespace psrun::launcher
