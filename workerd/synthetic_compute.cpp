#include "workerd/synthetic_compute.h"

#include <charconv>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <thread>

namespace psrun::worker {

namespace {
constexpr double kMaxMs = 3.6e6;
constexpr std::uint64_t kJitterStream = 0x6A09E667F3BCC909ull;  // apart from the dropout streams
}  // namespace

Result<ComputeJitter> parse_compute_jitter(const std::string& spec) {
    if (spec.empty() || spec == "none") return ComputeJitter{};
    const std::string prefix = "exp:";
    if (spec.rfind(prefix, 0) != 0)
        return make_error(ErrorCode::kInvalidArgument,
                          "unknown jitter '" + spec + "' (none or exp:MEAN_MS, e.g. exp:20)");
    const char* begin = spec.data() + prefix.size();
    const char* end = spec.data() + spec.size();
    double mean = 0;
    const auto [ptr, ec] = std::from_chars(begin, end, mean);
    if (ec != std::errc() || ptr != end || begin == end)
        return make_error(ErrorCode::kInvalidArgument, "exp:MEAN_MS needs a number of ms, got '" + spec + "'");
    if (!(mean > 0 && mean <= kMaxMs))
        return make_error(ErrorCode::kInvalidArgument, "exp:MEAN_MS needs 0 < MEAN_MS <= 3600000, got '" + spec + "'");
    return ComputeJitter{mean};
}

std::string to_string(const ComputeJitter& jitter) {
    if (!jitter.enabled()) return "none";
    char buf[64];
    std::snprintf(buf, sizeof buf, "exp:%g", jitter.exp_mean_ms);
    return buf;
}

SyntheticCompute::SyntheticCompute(double base_ms, ComputeJitter jitter, std::uint64_t seed, std::uint32_t worker)
    : base_ms_(base_ms), jitter_(jitter), rng_(seed ^ kJitterStream, worker) {}

double SyntheticCompute::next_ms() {
    if (!jitter_.enabled()) return base_ms_;
    return base_ms_ - jitter_.exp_mean_ms * std::log(rng_.uniform());  // inverse CDF; uniform() is in (0, 1)
}

void SyntheticCompute::run() { std::this_thread::sleep_for(std::chrono::duration<double, std::milli>(next_ms())); }

}  // namespace psrun::worker
