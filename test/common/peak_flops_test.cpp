// The FMA peak probe (common/peak_flops.h) against this CPU's clock: a real measurement, so the
// checks are ranges that any x86 core of the last decade falls in, not exact figures.
#include "common/peak_flops.h"

#include <catch2/catch.hpp>

#include <fstream>
#include <functional>
#include <optional>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

using psrun::PeakFlops;
using psrun::PeakProbeOptions;

namespace {

// The first "cpu MHz" of /proc/cpuinfo (on a VM: the host's nominal clock), if any.
std::optional<double> cpu_mhz() {
    std::ifstream in("/proc/cpuinfo");
    for (std::string line; std::getline(in, line);) {
        if (line.rfind("cpu MHz", 0) != 0) continue;
        const auto colon = line.find(':');
        if (colon != std::string::npos) return std::stod(line.substr(colon + 1));
    }
    return std::nullopt;
}

}  // namespace

TEST_CASE("the peak probe measures a positive f32 peak in a sane range of FLOP per cycle", "[peak]") {
    const PeakFlops p = psrun::measure_peak_flops(PeakProbeOptions{.threads = 1, .trial_ms = 10, .trials = 4});
    INFO(p.to_json().dump());
    CHECK(p.threads == 1);
    CHECK(p.cpus >= 1);
    CHECK(p.probe_ms > 0);
    CHECK(p.probe_ms < 5000);  // a few hundred ms; seconds only on a starved host
    CHECK_FALSE(p.cpu_model.empty());
#if defined(__x86_64__)
    // Every machine psrun builds on has AVX2 + FMA at least (oneDNN's avx2 path needs it too).
    REQUIRE(p.f32_isa != "none");
#endif
    if (p.f32_isa == "none") return;
    REQUIRE(p.f32_gflops > 0);
    const auto mhz = cpu_mhz();
    if (!mhz) {
        WARN("no cpu MHz in /proc/cpuinfo: the clock check is skipped");
        return;
    }
    // FLOP per cycle of one thread. AVX2 with one FMA pipe: 16; AVX-512 with two: 64. A VM reports
    // the nominal clock, and turbo may run up to twice as fast (a 2.1 GHz EPYC at 3.3 GHz shows
    // ~100); a busy shared host may take up to three quarters away.
    const double f32_per_cycle = p.f32_gflops * 1000 / *mhz;
    CHECK(f32_per_cycle >= 4);
    CHECK(f32_per_cycle <= 128);
    if (p.has_bf16()) {
        CHECK(p.bf16_isa == "avx512_bf16");
        const double bf16_per_cycle = p.bf16_gflops * 1000 / *mhz;
        CHECK(bf16_per_cycle >= 8);
        CHECK(bf16_per_cycle <= 256);
    } else {
        CHECK(p.bf16_isa == "none");
        CHECK(p.to_json()["bf16_gflops"].is_null());
    }
}

TEST_CASE("the peak scales with the threads of a run and is absent for an unknown precision", "[peak]") {
    PeakFlops p;
    p.cpus = 2;
    p.threads = 2;
    p.f32_gflops = 400;
    p.bf16_gflops = 800;
    CHECK(p.gflops_for("f32", 1) == Approx(200));
    CHECK(p.gflops_for("f32", 2) == Approx(400));
    CHECK(p.gflops_for("f32", 8) == Approx(400));  // threads beyond the CPUs add nothing
    CHECK(p.gflops_for("bf16", 1) == Approx(400));
    CHECK(p.gflops_for("fp8", 1) == 0);
    p.bf16_gflops = 0;
    CHECK(p.gflops_for("bf16", 2) == 0);
    CHECK(psrun::fraction_of_peak(100, 400).get<double>() == Approx(0.25));
    CHECK(psrun::fraction_of_peak(100, 0).is_null());
}

TEST_CASE("the peak probe refuses options it cannot run", "[peak]") {
    CHECK_THROWS_AS(psrun::measure_peak_flops(PeakProbeOptions{.threads = 0}), std::invalid_argument);
    CHECK_THROWS_AS(psrun::measure_peak_flops(PeakProbeOptions{.threads = 1, .trial_ms = 0}), std::invalid_argument);
    CHECK_THROWS_AS(psrun::measure_peak_flops(PeakProbeOptions{.threads = 1, .trial_ms = 5, .trials = 0}),
                    std::invalid_argument);
}

TEST_CASE("the peak sampler runs its trials on the caller's team and keeps the median and the best", "[peak]") {
    int calls = 0;
    std::vector<int> bodies;
    // A team that runs the bodies one after the other on this thread: each body's rate is its own.
    const psrun::PeakSampler::Team serial = [&](int threads, const std::function<void(int)>& body) {
        ++calls;
        for (int t = 0; t < threads; ++t) {
            bodies.push_back(t);
            body(t);
        }
    };
    psrun::PeakSampler sampler(2, 2, serial);
    CHECK(sampler.samples() == 0);
    CHECK(sampler.median().f32_gflops == 0);
    CHECK(calls == 0);  // calibration runs on the caller alone
    for (int i = 0; i < 5; ++i) sampler.sample();
    CHECK(sampler.samples() == 5);
    const PeakFlops median = sampler.median(), best = sampler.best();
    // One team call per precision and sample, each with both bodies.
    CHECK(calls == 5 * (median.has_bf16() ? 2 : 1));
    CHECK(bodies.size() == static_cast<std::size_t>(2 * calls));
    CHECK(median.statistic == "median");
    CHECK(best.statistic == "best");
    CHECK(median.samples == 5);
    CHECK_FALSE(median.pinned);  // the caller's team decides where its threads run
    REQUIRE(median.f32_gflops > 0);
    CHECK(best.f32_gflops >= median.f32_gflops);
    CHECK(best.bf16_gflops >= median.bf16_gflops);
    CHECK(median.to_json()["samples"] == 5);
    CHECK(median.to_json()["statistic"] == "median");
    CHECK_THROWS_AS(psrun::PeakSampler(0), std::invalid_argument);
    CHECK_THROWS_AS(psrun::PeakSampler(1, 0), std::invalid_argument);
}

TEST_CASE("cpu_model_name reads the first model name of a cpuinfo text", "[peak]") {
    std::istringstream amd(
        "processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 9R14 96-Core Processor  \n"
        "processor\t: 1\nmodel name\t: something else\n");
    CHECK(psrun::cpu_model_name(amd) == "AMD EPYC 9R14 96-Core Processor");
    std::istringstream arm("processor\t: 0\nBogoMIPS\t: 50.00\nCPU implementer\t: 0x41\n");
    CHECK(psrun::cpu_model_name(arm) == "unknown");
    std::istringstream empty_name("model name\t:   \n");
    CHECK(psrun::cpu_model_name(empty_name) == "unknown");
    CHECK_FALSE(psrun::cpu_model_name().empty());
}
