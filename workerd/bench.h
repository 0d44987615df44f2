// `psrun bench train`: steady-state training-step throughput of the compute engine (data feeding,
// forward, backward, Adam update) on synthetic MNIST-shaped data, as one JSON line.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace psrun::worker {

struct BenchOptions {
    int batch_size = 100;
    int threads = 2;
    std::string precision = "f32";
    int steps = 200;        // measured steps
    int warmup_steps = 20;  // not measured
    int fc1_blocked_weights = -1;  // see ModelConfig
    bool hand_kernels = true;  // see ModelConfig
};

// Runs the benchmark and returns its result; throws UsageError on bad options.
// Fields: images_per_sec, ms_per_step, ms_per_step_median, images_per_sec_median_step,
// cpu_ms_per_step, layers_ms {layer: {forward, backward}}, data_ms, update_ms,
// other_ms (per step), plus the configuration and oneDNN's implementation names.
nlohmann::json run_train_benchmark(const BenchOptions& options);

}  // namespace psrun::worker
