// One psd shard (or two) behind real ZeroMQ sockets, driven by PsClient: the optimizers' updates
// against hand-computed and local ones, INIT's settings, and sync mode's averaging. The
// lifecycle (INIT waits, refusals, ERROR replies, DONE, standby) and authentication are in
// server_lifecycle_test.cpp.
#include <catch2/catch.hpp>

#include <cmath>

#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::sgd;
using psrun::test::small_model;

TEST_CASE("async pushes apply SGD exactly as computed by hand", "[psd]") {
    Cluster cluster(1, base_options(1));
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    CHECK_FALSE(chief.servers_initialized());
    const std::size_t n = chief.layout().total;
    auto params = ramp(n, 1.0f), g1 = ramp(n, 0.5f, 0.1f), g2 = ramp(n, -0.25f);
    REQUIRE(chief.init(sgd(0.1f), params));
    std::vector<float> out(n);
    auto s1 = chief.push_pull(g1, 0, out);
    REQUIRE(s1);
    CHECK(s1->step == 1);
    auto s2 = chief.push_pull(g2, 1, out);
    REQUIRE(s2);
    CHECK(s2->step == 2);
    for (std::size_t i = 0; i < n; ++i) REQUIRE(out[i] == (params[i] - 0.1f * g1[i]) - 0.1f * g2[i]);
    auto stats = chief.stats(0);
    REQUIRE(stats);
    CHECK((*stats)["applied"] == 2);
}

TEST_CASE("Adam on the psd equals the optimizer applied locally; 2 shards equal 1", "[psd]") {
    const auto tensors = mnist_deep_tensors();
    const std::size_t n = total_elements(tensors);
    const auto init_params = ramp(n, 0.2f, -0.1f);
    wire::InitConfig adam;
    adam.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 1e-3f};
    std::vector<std::vector<float>> grads = {ramp(n, 1.0f, -0.5f), ramp(n, -0.3f, 0.2f), ramp(n, 0.7f)};

    std::vector<float> expected = init_params;
    Optimizer local(adam.optimizer, n);
    for (const auto& g : grads) local.apply(expected, g);

    for (std::uint32_t shards : {1u, 2u}) {
        Cluster cluster(shards, base_options(1));
        PsClient chief(cluster.client_options(0, tensors));
        REQUIRE(chief.hello());
        CHECK(chief.layout().num_shards == shards);
        REQUIRE(chief.init(adam, init_params));
        std::vector<float> out(n);
        ParamFrames frames;
        for (std::size_t s = 0; s < grads.size(); ++s) REQUIRE(chief.push_pull_frames(grads[s], s, frames));
        frames.copy_to(out, chief.layout());
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < n; ++i) mismatches += out[i] != expected[i];
        CHECK(mismatches == 0);
    }
}

TEST_CASE("psd updates with the momentum, betas and epsilon INIT sends, not the defaults", "[psd]") {
    const auto tensors = mnist_deep_tensors();
    const std::size_t n = total_elements(tensors);
    const auto init_params = ramp(n, 0.2f, -0.1f);
    const std::vector<std::vector<float>> grads = {ramp(n, 1.0f, -0.5f), ramp(n, -0.3f, 0.2f), ramp(n, 0.7f)};
    const OptimizerConfig tuned = GENERATE(
        OptimizerConfig{.kind = OptimizerKind::kAdamW,
                        .learning_rate = 1e-2f,
                        .beta1 = 0.8f,
                        .beta2 = 0.95f,
                        .epsilon = 1e-3f,
                        .weight_decay = 0.1f},
        OptimizerConfig{
            .kind = OptimizerKind::kAdam, .learning_rate = 1e-2f, .beta1 = 0.5f, .beta2 = 0.9f, .epsilon = 1e-2f},
        OptimizerConfig{.kind = OptimizerKind::kNesterov, .learning_rate = 1e-2f, .momentum = 0.5f});
    CAPTURE(to_string(tuned.kind));
    auto local_run = [&](const OptimizerConfig& config) {
        std::vector<float> p = init_params;
        Optimizer local(config, n);
        for (const auto& g : grads) local.apply(p, g, config.decays(2));
        return p;
    };
    // Decay on every tensor: one local optimizer over the flat buffer is then psd's per-tensor update.
    OptimizerConfig sent = tuned;
    sent.weight_decay_on = WeightDecayOn::kAll;
    const auto expected = local_run(sent);
    OptimizerConfig defaults = sent;
    defaults.momentum = OptimizerConfig{}.momentum;
    defaults.beta1 = OptimizerConfig{}.beta1;
    defaults.beta2 = OptimizerConfig{}.beta2;
    defaults.epsilon = OptimizerConfig{}.epsilon;
    const auto with_defaults = local_run(defaults);
    std::size_t differ = 0;
    for (std::size_t i = 0; i < n; ++i) differ += expected[i] != with_defaults[i];
    REQUIRE(differ > n / 2);  // the hyperparameters matter here

    Cluster cluster(1, base_options(1));
    PsClient chief(cluster.client_options(0, tensors));
    REQUIRE(chief.hello());
    wire::InitConfig init;
    init.optimizer = sent;
    REQUIRE(chief.init(init, init_params));
    ParamFrames frames;
    for (std::size_t s = 0; s < grads.size(); ++s) REQUIRE(chief.push_pull_frames(grads[s], s, frames));
    std::vector<float> out(n);
    frames.copy_to(out, chief.layout());
    std::size_t mismatches = 0;
    for (std::size_t i = 0; i < n; ++i) mismatches += out[i] != expected[i];
    CHECK(mismatches == 0);
}

TEST_CASE("sync mode averages N pushes per step and drops stale ones", "[psd]") {
    auto o = base_options(2);
    o.sync = true;
    o.replicas_to_aggregate = 2;
    o.straggler_every = 1;
    Cluster cluster(1, o);
    PsClient chief(cluster.client_options(0, small_model()));
    PsClient worker(cluster.client_options(1, small_model()));
    REQUIRE(chief.hello());
    REQUIRE(worker.hello());
    const std::size_t n = chief.layout().total;
    auto params = ramp(n, 1.0f), ga = ramp(n, 0.4f), gb = ramp(n, -0.2f, 1.0f);
    REQUIRE(chief.init(sgd(0.5f), params));
    std::vector<float> out_a(n), out_b(n);
    // The chief's push waits for the step token until the second gradient arrives.
    auto first = std::async(std::launch::async, [&] { return chief.push_pull(ga, 0, out_a); });
    CHECK(first.wait_for(std::chrono::milliseconds(300)) == std::future_status::timeout);
    auto second = worker.push_pull(gb, 0, out_b);
    REQUIRE(second);
    auto a = first.get();
    REQUIRE(a);
    CHECK(a->step == 1);
    CHECK(second->step == 1);
    for (std::size_t i = 0; i < n; ++i) {
        const float want = params[i] - 0.5f * ((ga[i] + gb[i]) * 0.5f);
        REQUIRE(out_a[i] == Approx(want).margin(1e-6));
        REQUIRE(out_b[i] == out_a[i]);
    }
    // A gradient computed at step 0 arrives after step 1 began: dropped, parameters unchanged.
    std::vector<float> out_c(n);
    auto stale = worker.push_pull(gb, 0, out_c);
    REQUIRE(stale);
    CHECK(stale->stale);
    CHECK(out_c == out_a);
    auto future = worker.push_pull(gb, 5, out_c);
    REQUIRE_FALSE(future);
    CHECK_THAT(future.error().message, Catch::Contains("future step"));
    auto stats = chief.stats(0);
    REQUIRE(stats);
    CHECK((*stats)["stale"] == 1);
    CHECK((*stats)["applied"] == 1);
}
