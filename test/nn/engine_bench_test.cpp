// Timing of mnist_deep forward+backward per step (batch 100, 2 OpenMP threads): the engine with
// and without its hand-written kernels, f32 and (where the CPU has it) bf16. (The A/B against
// the engine before it, worker::Model, is in docs/benchmarks.md: psrun bench train, binaries.) The variants run interleaved (one step each per round) so that the shared
// machine's load hits them alike. Hidden ([.]): run with `test_nn_engine [bench]`; prints one
// JSON line of the medians in ms, and the engine's per-layer split (forward, backward ms).
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <functional>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test/nn/engine_test_util.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/network.h"
#include "workerd/nn/zoo.h"

namespace psrun::nn::test {
namespace {

constexpr int kBatch = 100, kWarmup = 3, kRounds = 20;

void fill_batch(std::span<float> input, std::span<std::int32_t> labels) {
    const auto x = random_vector(input.size(), 2);
    std::transform(x.begin(), x.end(), input.begin(), [](float v) { return std::fabs(v); });
    for (std::size_t i = 0; i < labels.size(); ++i) labels[i] = static_cast<std::int32_t>(i % 10);
}

// One contender: a name and a train step. The variants run interleaved, one step each per
// round, so that the shared machine's load hits them alike; medians over the rounds.
struct Contender {
    std::string name;
    std::function<float(std::uint64_t)> step;
    std::vector<double> ms;
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
    }
    nlohmann::json layer_split() {
        net->set_profiling(true);
        net->reset_layer_times();
        for (int i = 0; i < 5; ++i) net->train_step(static_cast<std::uint64_t>(i));
        nlohmann::json out;
        for (const auto& t : net->layer_times())
            out[std::to_string(t.index) + " " + t.kind] = {std::round(t.forward_ms / 5 * 100) / 100,
                                                           std::round(t.backward_ms / 5 * 100) / 100};
        net->set_profiling(false);
        return out;
    }
    std::vector<float> params, grads;
    std::unique_ptr<Network> net;
};

TEST_CASE("mnist_deep step time: engine with and without hand kernels", "[.][bench]") {
    omp_set_num_threads(2);
    const bool bf16 = engine_bf16_supported();
    EngineRunner engine_f32(Precision::kF32, true), engine_f32_primitives(Precision::kF32, false);
    std::vector<Contender> all{
        {"engine_f32_ms", [&](std::uint64_t s) { return engine_f32.net->train_step(s); }, {}},
        {"engine_f32_primitives_ms", [&](std::uint64_t s) { return engine_f32_primitives.net->train_step(s); }, {}},
    };
    std::unique_ptr<EngineRunner> engine_bf16;
    if (bf16) {
        engine_bf16 = std::make_unique<EngineRunner>(Precision::kBf16, true);
        all.push_back({"engine_bf16_ms", [&](std::uint64_t s) { return engine_bf16->net->train_step(s); }, {}});
    }
    for (int round = 0; round < kWarmup + kRounds; ++round) {
        for (auto& c : all) {
            const auto t0 = std::chrono::steady_clock::now();
            const float loss = c.step(static_cast<std::uint64_t>(round));
            const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
            REQUIRE(std::isfinite(loss));
            if (round >= kWarmup) c.ms.push_back(ms);
        }
    }
    nlohmann::json out{{"bench", "mnist_deep_train_step"}, {"batch", kBatch}, {"threads", 2}, {"rounds", kRounds}};
    for (auto& c : all) {
        std::sort(c.ms.begin(), c.ms.end());
        out[c.name] = std::round(c.ms[c.ms.size() / 2] * 10) / 10;
    }
    out["engine_f32_layers_fwd_bwd_ms"] = engine_f32.layer_split();
    if (engine_bf16) out["engine_bf16_layers_fwd_bwd_ms"] = engine_bf16->layer_split();
    std::cout << out.dump() << std::endl;
    CHECK(out["engine_f32_ms"].get<double>() > 0);
}

}  // namespace
}  // namespace psrun::nn::test
