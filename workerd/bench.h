// `psrun bench train`: steady-state training-step throughput of the compute engine (data feeding,
// forward, backward, Adam update) for any model, on synthetic data of the model's input shape,
// as one JSON line with the time of each built layer.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace psrun::worker {

struct BenchOptions {
    std::string model = "mnist_deep";  // a built-in name or a model file
    int batch_size = 100;
    int threads = 2;
    std::string precision = "f32";
    int steps = 200;           // measured steps
    int warmup_steps = 20;     // not measured
    bool hand_kernels = true;  // nn::NetworkOptions::hand_kernels
    bool peak = true;          // sample this host's FMA peak between the measured steps (common/peak_flops.h)
};

// Runs the benchmark and returns its result; throws UsageError on bad options.
// Fields: images_per_sec, ms_per_step, ms_per_step_median, images_per_sec_median_step,
// cpu_ms_per_step, layers [{index, kind, forward_ms, backward_ms}] (per step, one entry per
// built layer: `index` is its first description layer), data_ms, update_ms,
// other_ms (per step), plus the configuration and oneDNN's implementation names; and the
// figures against this host: cpu_model, loadavg_1m, mflop_per_image (workerd/train_flops.h),
// gflops, and with `peak` the samples taken between the steps ("peak": common/peak_flops.h's
// JSON for --threads threads, their median), peak_gflops (that median of the run's precision),
// fraction_of_peak and fraction_of_peak_median_step against it, peak_best_gflops and
// fraction_of_best_peak against the fastest sample (null when the CPU lacks the precision's FMA);
// the engine's buffers (nn::MemoryUse: activations, their gradients, temporaries):
// memory_planned, memory_planned_bytes, memory_unplanned_bytes (one buffer each) and both
// _per_example.
nlohmann::json run_train_benchmark(const BenchOptions& options);

}  // namespace psrun::worker
