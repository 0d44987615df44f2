// This host's floating-point peak, measured rather than looked up: T threads (one per CPU of the
// process's affinity mask, pinned) each run chains of fused multiply-adds over enough independent
// accumulators to fill the FMA pipes (AVX-512 where the CPU has it, else AVX2 + FMA), and, where
// the CPU has AVX512-BF16, chains of bf16 dot products (vdpbf16ps). A run is a calibrated trial of
// about trial_ms per thread, repeated `trials` times; the peak is the best trial's sum of the
// threads' rates (the host is shared: a trial that lost its CPU to another process reads low).
//
// FLOP convention (as the model descriptions'): a multiply-add counts 2, so one 512-bit f32 FMA is
// 32 FLOP and one 512-bit vdpbf16ps (16 lanes x 2 products x 2) is 64 FLOP.
//
// Thread safety: measure_peak_flops() may be called from any thread; it starts its threads and
// joins them all before it returns (none is left running, so a process that must stay
// single-threaded, as psrun bench cluster's parent before Supervisor::run, may call it).
#pragma once

#include <istream>
#include <string>

#include <nlohmann/json.hpp>

namespace psrun {

struct PeakFlops {
    std::string cpu_model;      // /proc/cpuinfo's "model name"; "unknown" when absent
    int cpus = 0;               // CPUs in the process's affinity mask
    int threads = 0;            // threads that ran the probe at once: min(requested, cpus)
    bool pinned = false;        // each on its own CPU of the affinity mask
    std::string f32_isa;        // "avx512f", "avx2+fma", or "none" (no FMA: f32_gflops 0)
    double f32_gflops = 0;      // all `threads` together, GFLOP/s
    std::string bf16_isa;       // "avx512_bf16", or "none": bf16_gflops 0 (absent)
    double bf16_gflops = 0;     // all `threads` together, GFLOP/s
    double probe_ms = 0;        // the probe's wall time, calibration included

    bool has_bf16() const { return bf16_gflops > 0; }
    double f32_gflops_per_thread() const { return threads > 0 ? f32_gflops / threads : 0.0; }
    double bf16_gflops_per_thread() const { return threads > 0 ? bf16_gflops / threads : 0.0; }
    // The peak of `precision` ("f32" or "bf16") for a run of `threads` threads at this probe's
    // per-thread rate (threads beyond `cpus` add nothing); 0 when the CPU lacks that precision or
    // the name is neither.
    double gflops_for(const std::string& precision, int threads) const;
    // {"cpu_model", "cpus", "threads", "pinned", "f32_isa", "f32_gflops", "bf16_isa", "bf16_gflops"
    // (null when absent), "probe_ms"}.
    nlohmann::json to_json() const;
};

struct PeakProbeOptions {
    int threads = 1;        // >= 1; capped at the CPUs of the affinity mask
    double trial_ms = 15;   // per trial and thread (calibrated on one thread first)
    int trials = 8;         // per precision; the best counts
};

// Measures the peak (about 2 x trials x trial_ms plus ~10 ms of calibration). Throws
// std::invalid_argument for threads < 1, trials < 1 or trial_ms <= 0.
PeakFlops measure_peak_flops(const PeakProbeOptions& options);

// "model name" of the first processor in a /proc/cpuinfo text; "unknown" when there is none
// (e.g. on an architecture whose cpuinfo names it otherwise).
std::string cpu_model_name(std::istream& cpuinfo);
// The same from /proc/cpuinfo.
std::string cpu_model_name();

// The fraction `achieved_gflops / peak_gflops`, or null when the peak is unknown (0).
nlohmann::json fraction_of_peak(double achieved_gflops, double peak_gflops);

}  // namespace psrun
