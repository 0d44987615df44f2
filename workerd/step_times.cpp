#include "workerd/step_times.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace psrun::worker {

void StepTimes::add(double seconds, std::uint64_t global_step) {
    const double us = seconds * 1e6;
    const int bucket = us < 1 ? 0 : std::min(kBuckets - 1, 1 + static_cast<int>(std::log2(us) * kPerDoubling));
    ++buckets_[static_cast<std::size_t>(bucket)];
    ++count_;
    if (seconds > longest_ || count_ == 1) {
        longest_ = seconds;
        longest_step_ = global_step;
    }
}

double StepTimes::quantile(double q) const {
    if (count_ == 0) return 0;
    const auto rank = static_cast<std::uint64_t>(std::ceil(std::clamp(q, 0.0, 1.0) * static_cast<double>(count_)));
    std::uint64_t seen = 0;
    for (int b = 0; b < kBuckets; ++b) {
        seen += buckets_[static_cast<std::size_t>(b)];
        if (seen >= std::max<std::uint64_t>(rank, 1)) {
            if (b == 0) return 0.5e-6;
            return std::min(longest_, std::exp2((b - 0.5) / kPerDoubling) * 1e-6);  // the bucket's middle
        }
    }
    return longest_;
}

std::string StepTimes::text() const {
    if (count_ == 0) return "no step";
    return fmt::format("median {:.1f} ms, p99 {:.1f} ms, longest {:.0f} ms (global step {})", 1e3 * quantile(0.5),
                       1e3 * quantile(0.99), 1e3 * longest_, longest_step_);
}

}  // namespace psrun::worker
