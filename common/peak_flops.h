// This host's floating-point peak, measured rather than looked up: T threads (one per CPU of the
// process's affinity mask, pinned) each run chains of fused multiply-adds over enough independent
// accumulators to fill the FMA pipes (AVX-512 where the CPU has it, else AVX2 + FMA), and, where
// the CPU has AVX512-BF16, chains of bf16 dot products (vdpbf16ps); an ISA cap (ONEDNN_MAX_CPU_ISA,
// common/cpu_isa.h) caps the probe too, so a capped run is compared with the peak it can reach.
// A run is a calibrated trial of about trial_ms per thread, repeated `trials` times; the peak is
// the best trial's sum of the threads' rates (the host is shared: a trial that lost its CPU to
// another process reads low).
//
// FLOP convention (as the model descriptions'): a multiply-add counts 2, so one 512-bit f32 FMA is
// 32 FLOP and one 512-bit vdpbf16ps (16 lanes x 2 products x 2) is 64 FLOP.
//
// Thread safety: measure_peak_flops() may be called from any thread; it starts its threads and
// joins them all before it returns (none is left running, so a process that must stay
// single-threaded, as psrun bench cluster's parent before Supervisor::run, may call it).
#pragma once

#include <functional>
#include <istream>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace psrun {

struct PeakFlops {
    std::string cpu_model;           // /proc/cpuinfo's "model name"; "unknown" when absent
    int cpus = 0;                    // CPUs in the process's affinity mask
    int threads = 0;                 // threads that ran the probe at once: min(requested, cpus)
    bool pinned = false;             // each on its own CPU of the affinity mask
    std::string f32_isa;             // "avx512f", "avx2+fma", or "none" (no FMA: f32_gflops 0)
    double f32_gflops = 0;           // all `threads` together, GFLOP/s
    std::string bf16_isa;            // "avx512_bf16", or "none": bf16_gflops 0 (absent)
    double bf16_gflops = 0;          // all `threads` together, GFLOP/s
    int samples = 0;                 // trials per precision the figures come from
    std::string statistic = "best";  // of those trials: "best" or "median" (PeakSampler)
    double probe_ms = 0;             // the probe's wall time, calibration included

    bool has_bf16() const { return bf16_gflops > 0; }
    double f32_gflops_per_thread() const { return threads > 0 ? f32_gflops / threads : 0.0; }
    double bf16_gflops_per_thread() const { return threads > 0 ? bf16_gflops / threads : 0.0; }
    // The peak of `precision` ("f32" or "bf16") for a run of `threads` threads at this probe's
    // per-thread rate (threads beyond `cpus` add nothing); 0 when the CPU lacks that precision or
    // the name is neither.
    double gflops_for(const std::string& precision, int threads) const;
    // {"cpu_model", "cpus", "threads", "pinned", "f32_isa", "f32_gflops", "bf16_isa", "bf16_gflops"
    // (null when absent), "samples", "statistic", "probe_ms"}.
    nlohmann::json to_json() const;
};

struct PeakProbeOptions {
    int threads = 1;       // >= 1; capped at the CPUs of the affinity mask
    double trial_ms = 15;  // per trial and thread (calibrated on one thread first)
    int trials = 8;        // per precision; the best counts
};

// Measures the peak once, before a run: `trials` samples of a PeakSampler, the best (about
// 2 x trials x trial_ms plus ~10 ms of calibration). Throws std::invalid_argument for threads < 1,
// trials < 1 or trial_ms <= 0.
PeakFlops measure_peak_flops(const PeakProbeOptions& options);

// The peak sampled through a run rather than once before it. A shared host's speed drifts by
// 10-20% over seconds (other tenants, clocks), so a probe taken at one moment and compared with a
// run's steps over another mixes two hosts; a caller that calls sample() between pieces of the run
// (e.g. every few training steps, outside their timing) gets a peak taken under the same
// conditions as the steps, and compares like with like through median() (best() is the fastest
// moment of the run).
//
// Thread safety: one caller at a time. sample() runs its trials on the team and returns when
// every thread of it has finished.
class PeakSampler {
  public:
    // Runs body(t) for every t in [0, threads) at once, each on its own thread, and returns when
    // all have returned. A caller whose work runs on a thread pool (OpenMP) passes that pool, so
    // the probe neither competes with the pool's idle-spinning threads nor runs on other CPUs.
    using Team = std::function<void(int threads, const std::function<void(int)>& body)>;

    // Calibrates each precision's trial to about trial_ms per thread on one thread (~10 ms).
    // Without a team, trials run on fresh threads, each pinned to a CPU of the affinity mask.
    // Throws std::invalid_argument for threads < 1 or trial_ms <= 0.
    explicit PeakSampler(int threads, double trial_ms = 15, Team team = {});
    ~PeakSampler();
    PeakSampler(const PeakSampler&) = delete;
    PeakSampler& operator=(const PeakSampler&) = delete;

    // One trial of each precision the CPU has (about 2 x trial_ms).
    void sample();
    int samples() const;
    // Per precision, the median or the best trial so far (0 GFLOP/s before the first sample).
    PeakFlops median() const;
    PeakFlops best() const;

  private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

// "model name" of the first processor in a /proc/cpuinfo text; "unknown" when there is none
// (e.g. on an architecture whose cpuinfo names it otherwise).
std::string cpu_model_name(std::istream& cpuinfo);
// The same from /proc/cpuinfo.
std::string cpu_model_name();

// The 1-minute load average of /proc/loadavg, printed beside every benchmark figure; -1 when it
// cannot be read.
double loadavg_1m();

// The fraction `achieved_gflops / peak_gflops`, or null when the peak is unknown (0).
nlohmann::json fraction_of_peak(double achieved_gflops, double peak_gflops);

}  // namespace psrun
