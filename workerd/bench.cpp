#include "workerd/bench.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <ctime>
#include <fstream>
#include <functional>
#include <optional>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "common/peak_flops.h"
#include "common/rng.h"
#include "workerd/datasets.h"
#include "workerd/onnx/model_loader.h"
#include "workerd/train_flops.h"
#include "workerd/train_options.h"
#include "workerd/trainer.h"

namespace psrun::worker {

namespace {

// `count` random images of the model's input shape with random labels: the step's cost does
// not depend on the pixels.
LabeledImages synthetic_images(const nn::ModelDescription& model, std::size_t count) {
    LabeledImages data;
    data.images.count = count;
    const ModelInput input = model_input(model);
    data.images.channels = input.channels;
    data.images.height = input.height;
    data.images.width = input.width;
    data.images.u8.resize(count * data.images.example_size());
    data.labels.resize(count);
    Rng rng(7);
    for (auto& p : data.images.u8) p = static_cast<std::uint8_t>(rng.below(256));
    for (auto& l : data.labels) l = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(model.classes)));
    return data;
}

// The peak samples (common/peak_flops.h): a trial of ~10 ms per precision before the measured
// steps, after every 10th step and, for short runs, after the last until there are 8.
constexpr double kPeakTrialMs = 10;
constexpr int kPeakEvery = 10;
constexpr int kPeakMinSamples = 8;

// PeakSampler's team: the OpenMP threads the steps run on (when OpenMP gives fewer than asked,
// a thread runs several bodies one after the other).
void openmp_team(int threads, const std::function<void(int)>& body) {
#pragma omp parallel num_threads(threads)
    for (int t = omp_get_thread_num(); t < threads; t += omp_get_num_threads()) body(t);
}

}  // namespace

nlohmann::json run_train_benchmark(const BenchOptions& o) {
    if (o.batch_size < 1 || o.batch_size > 4096) throw UsageError("--batch-size must be in 1..4096");
    if (o.threads < 1) throw UsageError("--threads must be >= 1");
    if (o.steps < 1 || o.warmup_steps < 0) throw UsageError("--steps must be >= 1");
    const double load = loadavg_1m();
    TrainerConfig config;
    auto model = onnx_io::load_any_model(o.model);
    if (!model) throw UsageError("--model " + o.model + ": " + model.error().message);
    config.model = std::make_shared<const nn::ModelDescription>(std::move(*model));
    config.network.batch_size = o.batch_size;
    auto precision = parse_precision(o.precision);
    if (!precision) throw UsageError("--precision: " + precision.error().message);
    set_compute_threads(o.threads);
    // The peak is sampled between the measured steps (outside their timing), on the OpenMP team
    // that runs them, so that it and the steps see the same host (common/peak_flops.h).
    std::optional<PeakSampler> sampler;
    if (o.peak) sampler.emplace(o.threads, kPeakTrialMs, openmp_team);
    config.network.precision = *precision;
    config.network.hand_kernels = o.hand_kernels;
    config.optimizer.kind = OptimizerKind::kAdam;
    config.optimizer.learning_rate = 1e-4f;
    const LabeledImages data = synthetic_images(*config.model, 10000);
    Trainer trainer(config, data, data);

    for (int i = 0; i < o.warmup_steps; ++i) {
        trainer.compute_gradients();
        trainer.apply_gradients();
    }
    nn::Network& network = trainer.network();
    network.reset_layer_times();
    network.set_profiling(true);
    const double data0 = trainer.data_ms(), update0 = trainer.update_ms();
    const std::clock_t cpu0 = std::clock();
    std::vector<double> step_ms(static_cast<std::size_t>(o.steps));
    auto last = std::chrono::steady_clock::now();
    double total_ms = 0;
    std::clock_t probe_cpu = 0;  // the samples' CPU time, which the steps' does not include
    const auto sample_peak = [&] {
        const std::clock_t c0 = std::clock();
        sampler->sample();
        probe_cpu += std::clock() - c0;
    };
    if (sampler) sample_peak();
    for (int i = 0; i < o.steps; ++i) {
        trainer.compute_gradients();
        trainer.apply_gradients();
        const auto now = std::chrono::steady_clock::now();
        const double ms = std::chrono::duration<double, std::milli>(now - last).count();
        step_ms[static_cast<std::size_t>(i)] = ms;
        total_ms += ms;
        if (sampler && (i + 1) % kPeakEvery == 0) sample_peak();
        last = std::chrono::steady_clock::now();
    }
    while (sampler && sampler->samples() < kPeakMinSamples) sample_peak();
    const double per_step = total_ms / o.steps;
    // The median step is robust to the stalls of a shared host (a descheduled OpenMP thread
    // holds up one step); it is what bench/pytorch_mnist_deep.py reports as well.
    std::nth_element(step_ms.begin(), step_ms.begin() + o.steps / 2, step_ms.end());
    const double median_step = step_ms[static_cast<std::size_t>(o.steps / 2)];
    // Process CPU time (all threads): on a shared machine, with --threads 1 this estimates the
    // step time an idle core would give; with more threads it includes OpenMP's spin-waiting.
    const double cpu_per_step =
        1000.0 * static_cast<double>(std::clock() - cpu0 - probe_cpu) / CLOCKS_PER_SEC / o.steps;

    nlohmann::json layers = nlohmann::json::array();
    double layers_sum = 0;
    for (const nn::LayerTime& t : network.layer_times()) {
        layers.push_back({{"index", t.index},
                          {"kind", t.kind},
                          {"forward_ms", t.forward_ms / o.steps},
                          {"backward_ms", t.backward_ms / o.steps}});
        layers_sum += (t.forward_ms + t.backward_ms) / o.steps;
    }
    const double data_ms = (trainer.data_ms() - data0) / o.steps;
    const double update_ms = (trainer.update_ms() - update0) / o.steps;
    const auto v = dnnl::version();
    const double flops = training_flops(*config.model).total();
    const double gflops = o.batch_size / (per_step / 1000.0) * flops / 1e9;
    const double gflops_median = o.batch_size / (median_step / 1000.0) * flops / 1e9;
    nlohmann::json out = {
        {"bench", "train"},
        {"model", trainer.model().name},
        {"precision", o.precision},
        {"batch_size", o.batch_size},
        {"threads", omp_get_max_threads()},
        {"steps", o.steps},
        {"warmup_steps", o.warmup_steps},
        {"hand_kernels", o.hand_kernels},
        {"images_per_sec", o.batch_size / (per_step / 1000.0)},
        {"ms_per_step", per_step},
        {"ms_per_step_median", median_step},
        {"images_per_sec_median_step", o.batch_size / (median_step / 1000.0)},
        {"cpu_ms_per_step", cpu_per_step},
        {"layers", layers},
        {"data_ms", data_ms},
        {"update_ms", update_ms},
        {"other_ms", per_step - layers_sum - data_ms - update_ms},
        {"onednn", std::to_string(v->major) + "." + std::to_string(v->minor) + "." + std::to_string(v->patch)},
        {"implementations", network.implementations()},
        {"cpu_model", cpu_model_name()},
        {"loadavg_1m", load},
        {"mflop_per_image", flops / 1e6},
        {"gflops", gflops},
    };
    // The engine's activations, their gradients and temporaries (nn::MemoryUse).
    const nn::MemoryUse memory = network.memory_use();
    const auto per_example = [&](std::size_t bytes) { return static_cast<double>(bytes) / o.batch_size; };
    out["memory_planned"] = memory.planned;
    out["memory_planned_bytes"] = memory.planned_bytes;
    out["memory_unplanned_bytes"] = memory.unplanned_bytes;
    out["memory_planned_bytes_per_example"] = per_example(memory.planned_bytes);
    out["memory_unplanned_bytes_per_example"] = per_example(memory.unplanned_bytes);
    if (sampler) {
        const PeakFlops peak = sampler->median(), best = sampler->best();
        const double limit = peak.gflops_for(o.precision, omp_get_max_threads());
        const double best_limit = best.gflops_for(o.precision, omp_get_max_threads());
        out["peak"] = peak.to_json();
        out["peak_gflops"] = limit > 0 ? nlohmann::json(limit) : nlohmann::json(nullptr);
        out["fraction_of_peak"] = fraction_of_peak(gflops, limit);
        out["fraction_of_peak_median_step"] = fraction_of_peak(gflops_median, limit);
        out["peak_best_gflops"] = best_limit > 0 ? nlohmann::json(best_limit) : nlohmann::json(nullptr);
        out["fraction_of_best_peak"] = fraction_of_peak(gflops, best_limit);
    }
    return out;
}

}  // namespace psrun::worker
