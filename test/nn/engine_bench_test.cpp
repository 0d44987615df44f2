// Timing of mnist_deep forward+backward per step (batch 100, 2 OpenMP threads): the engine
// with its pattern-matched hand kernels and with oneDNN primitives only, f32 and (where the
// CPU has it) bf16. The variants run interleaved (one step each per round) so that the shared
// machine's load hits them alike. Hidden ([.]): run with `test_nn_engine [bench]`; prints one
// JSON line of the medians in ms, the speed-up of the hand kernels (of the step medians, and of
// the sums of the per-layer medians, which the load distorts less), every variant's per-layer
// split (median forward, backward ms) and, in bf16, the dense layers' oneDNN implementations.
// (The A/B against worker::Model, the engine this one replaced, was run on binaries: psrun
// bench train, docs/benchmarks.md.)
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <map>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test/nn/engine_test_util.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"

namespace psrun::nn::test {
namespace {

constexpr int kBatch = 100, kWarmup = 3, kRounds = 30;

void fill_batch(std::span<float> input, std::span<std::int32_t> labels) {
    const auto x = random_vector(input.size(), 2);
    std::transform(x.begin(), x.end(), input.begin(), [](float v) { return std::fabs(v); });
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>(i % 10);
}

double median(std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return std::round(v[v.size() / 2] * 100) / 100;
}

// Per-layer forward and backward ms of one step: {"layer": {forward, backward}}.
using Split = std::map<std::string, std::pair<double, double>>;

// One contender: a name, a train step, and the per-layer split of the last step (which then
// resets its layer times). The variants run interleaved, one step each per round, so that the
// shared machine's load hits them alike; medians over the rounds, per layer too.
struct Contender {
    std::string name;
    std::function<float(std::uint64_t)> step;
    std::function<Split()> last_split;
    std::vector<double> ms;
    std::map<std::string, std::pair<std::vector<double>, std::vector<double>>> layers;

    void record(double step_ms) {
        ms.push_back(step_ms);
        for (const auto& [layer, t] : last_split()) {
            layers[layer].first.push_back(t.first);
            layers[layer].second.push_back(t.second);
        }
    }
    nlohmann::json layer_medians() const {
        nlohmann::json out;
        for (const auto& [layer, t] : layers) out[layer] = {median(t.first), median(t.second)};
        return out;
    }
    // The sum of the per-layer medians: a step on a quiet machine, robust to the load.
    double layer_median_sum() const {
        double sum = 0;
        for (const auto& [layer, t] : layers) sum += median(t.first) + median(t.second);
        return std::round(sum * 100) / 100;
    }
};

struct EngineRunner {
    EngineRunner(Precision precision, bool hand_kernels) {
        auto model = load_model("mnist_deep");
        REQUIRE(model);
        params.assign(static_cast<std::size_t>(model->parameter_count), 0.0f);
        initialize_parameters(*model, 1, params);
        grads.assign(params.size(), 0.0f);
        NetworkOptions options{kBatch, precision, false};
        options.hand_kernels = hand_kernels;
        auto created = Network::create(*model, options, params, grads);
        INFO((created ? std::string() : created.error().message));
        REQUIRE(created);
        net = std::move(*created);
        fill_batch(net->input(), net->labels());
        net->set_profiling(true);
    }
    Contender contender(std::string name) {
        return {std::move(name),
                [this](std::uint64_t s) { return net->train_step(s); },
                [this] {
                    Split out;
                    for (const auto& t : net->layer_times())
                        out[std::to_string(t.index) + " " + t.kind] = {t.forward_ms, t.backward_ms};
                    net->reset_layer_times();
                    return out;
                },
                {},
                {}};
    }
    std::vector<float> params, grads;
    std::unique_ptr<Network> net;
};

// The per-layer times come from the same interleaved steps (a clock read around each layer
// or primitive: no effect measurable next to a step).
TEST_CASE("mnist_deep step time: hand kernels vs primitives", "[.][bench]") {
    omp_set_num_threads(2);
    const bool bf16 = engine_bf16_supported();
    EngineRunner engine_f32_hand(Precision::kF32, true), engine_f32(Precision::kF32, false);
    std::vector<Contender> all{engine_f32_hand.contender("engine_f32_hand"), engine_f32.contender("engine_f32")};
    std::unique_ptr<EngineRunner> engine_bf16_hand, engine_bf16;
    if (bf16) {
        engine_bf16_hand = std::make_unique<EngineRunner>(Precision::kBf16, true);
        engine_bf16 = std::make_unique<EngineRunner>(Precision::kBf16, false);
        all.push_back(engine_bf16_hand->contender("engine_bf16_hand"));
        all.push_back(engine_bf16->contender("engine_bf16"));
    }
    for (int round = 0; round < kWarmup + kRounds; ++round) {
        for (auto& c : all) {
            const auto t0 = std::chrono::steady_clock::now();
            const float loss = c.step(static_cast<std::uint64_t>(round));
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            REQUIRE(std::isfinite(loss));
            if (round >= kWarmup) {
                c.record(ms);
            } else {
                c.last_split();
            }
        }
    }
    nlohmann::json out{{"bench", "mnist_deep_train_step"}, {"batch", kBatch}, {"threads", 2}, {"rounds", kRounds}};
    for (const auto& c : all) {
        out[c.name + "_ms"] = median(c.ms);
        out[c.name + "_layer_median_sum_ms"] = c.layer_median_sum();
        out["layers_fwd_bwd_ms"][c.name] = c.layer_medians();
    }
    // Speed-up of the hand kernels (> 1: faster with them).
    const auto ratio = [&](const char* without, const char* with) {
        return std::round(out[without].get<double>() / out[with].get<double>() * 1000) / 1000;
    };
    out["f32_hand_speedup"] = ratio("engine_f32_ms", "engine_f32_hand_ms");
    out["f32_hand_speedup_by_layer_sums"] =
        ratio("engine_f32_layer_median_sum_ms", "engine_f32_hand_layer_median_sum_ms");
    if (bf16) {
        out["bf16_hand_speedup"] = ratio("engine_bf16_ms", "engine_bf16_hand_ms");
        out["bf16_hand_speedup_by_layer_sums"] =
            ratio("engine_bf16_layer_median_sum_ms", "engine_bf16_hand_layer_median_sum_ms");
        for (const auto& line : engine_bf16_hand->net->implementations())
            if (line.find("dense") != std::string::npos) out["engine_bf16_dense_impls"].push_back(line);
    }
    std::cout << out.dump() << std::endl;
    CHECK(out["engine_f32_hand_ms"].get<double>() > 0);
}

}  // namespace
}  // namespace psrun::nn::test
