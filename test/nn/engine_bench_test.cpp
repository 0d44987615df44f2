// Timing of mnist_deep forward+backward per step (batch 100, 2 OpenMP threads): the engine
// against the existing Model with and without its hand-written kernels, f32 and (where the CPU
// has it) bf16. Hidden ([.]): run with `test_nn_engine [bench]`; prints one JSON line of the
// medians in ms, and the engine's per-layer split.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <iostream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "test/nn/engine_test_util.h"
#include "workerd/model.h"
#include "workerd/nn/network.h"
#include "workerd/nn/zoo.h"

namespace psrun::nn::test {
namespace {

constexpr int kBatch = 100, kWarmup = 3, kSteps = 15;

template <class Step>
double median_ms(Step&& step) {
    std::vector<double> ms;
    for (int i = 0; i < kWarmup + kSteps; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        const float loss = step(static_cast<std::uint64_t>(i));
        const double t = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        REQUIRE(std::isfinite(loss));
        if (i >= kWarmup) ms.push_back(t);
    }
    std::sort(ms.begin(), ms.end());
    return ms[ms.size() / 2];
}

double time_model(worker::Precision precision, bool hand_kernels) {
    worker::ModelShape shape;
    worker::ParameterSet params(shape), grads(shape);
    params.init_tutorial(1);
    worker::ModelConfig cfg;
    cfg.shape = shape;
    cfg.batch_size = kBatch;
    cfg.precision = precision;
    cfg.hand_kernels = hand_kernels;
    worker::Model model(cfg, params, grads);
    const auto x = random_vector(model.input().size(), 2);
    std::transform(x.begin(), x.end(), model.input().begin(), [](float v) { return std::fabs(v); });
    std::fill(model.labels().begin(), model.labels().end(), 3);
    return median_ms([&](std::uint64_t seed) { return model.train_step(seed); });
}

double time_engine(Precision precision, nlohmann::json& layers) {
    auto model = load_model("mnist_deep");
    REQUIRE(model);
    std::vector<float> params(static_cast<std::size_t>(model->parameter_count)), grads(params.size());
    worker::ParameterSet ps{worker::ModelShape{}};
    ps.init_tutorial(1);
    std::copy(ps.all().begin(), ps.all().end(), params.begin());
    auto net = Network::create(*model, NetworkOptions{kBatch, precision, false}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    auto& n = **net;
    const auto x = random_vector(n.input().size(), 2);
    std::transform(x.begin(), x.end(), n.input().begin(), [](float v) { return std::fabs(v); });
    std::fill(n.labels().begin(), n.labels().end(), 3);
    const double ms = median_ms([&](std::uint64_t seed) { return n.train_step(seed); });
    n.set_profiling(true);
    for (int i = 0; i < 5; ++i) n.train_step(static_cast<std::uint64_t>(i));
    for (const auto& t : n.layer_times()) {
        std::ostringstream key;
        key << t.index << " " << t.kind;
        layers[key.str()] = {std::round(t.forward_ms / 5 * 100) / 100, std::round(t.backward_ms / 5 * 100) / 100};
    }
    return ms;
}

TEST_CASE("mnist_deep step time: engine vs Model", "[.][bench]") {
    omp_set_num_threads(2);
    nlohmann::json out{{"bench", "mnist_deep_train_step"}, {"batch", kBatch}, {"threads", 2}, {"steps", kSteps}};
    nlohmann::json layers_f32, layers_bf16;
    out["engine_f32_ms"] = time_engine(Precision::kF32, layers_f32);
    out["model_f32_ms"] = time_model(worker::Precision::kF32, false);
    out["model_f32_hand_kernels_ms"] = time_model(worker::Precision::kF32, true);
    if (engine_bf16_supported()) {
        out["engine_bf16_ms"] = time_engine(Precision::kBf16, layers_bf16);
        out["model_bf16_ms"] = time_model(worker::Precision::kBf16, false);
        out["model_bf16_hand_kernels_ms"] = time_model(worker::Precision::kBf16, true);
    }
    out["engine_f32_layers_fwd_bwd_ms"] = layers_f32;
    if (!layers_bf16.empty()) out["engine_bf16_layers_fwd_bwd_ms"] = layers_bf16;
    std::cout << out.dump() << std::endl;
    CHECK(out["engine_f32_ms"].get<double>() > 0);
}

}  // namespace
}  // namespace psrun::nn::test
