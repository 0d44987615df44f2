// Whole models on the engine: mnist_deep from the zoo against the existing hand-built
// psrun::worker::Model (same parameters and batch, dropout keep 1: same loss and gradients,
// which proves the plain layouts and NHWC flattening match what goes on the wire today); and
// short SGD runs that lower the loss of dls_mlp, mnist_softmax and lenet5 on a generated,
// separable 10-class dataset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "test/nn/engine_test_util.h"
#include "workerd/model.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"

namespace psrun::nn::test {
namespace {

ModelDescription zoo(const char* name) {
    auto model = load_model(name);
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

ModelDescription without_dropout(ModelDescription model) {
    for (auto& l : model.layers)
        if (l.kind == LayerKind::kDropout) l.keep_prob = 1.0;
    return model;
}

void random_batch(std::span<float> images, std::span<std::int32_t> labels, std::uint64_t seed) {
    worker::Rng rng(seed);
    for (auto& v : images) v = static_cast<float>(rng.uniform());
    for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(10));
}

TEST_CASE("initialize_parameters reproduces ParameterSet::init_tutorial for mnist_deep", "[nn_engine][mnist_deep]") {
    const auto model = zoo("mnist_deep");
    worker::ParameterSet ps{worker::ModelShape{}};
    REQUIRE(ps.size() == static_cast<std::size_t>(model.parameter_count));
    ps.init_tutorial(17);
    std::vector<float> p(ps.size());
    initialize_parameters(model, 17, p);
    CHECK(std::equal(p.begin(), p.end(), ps.all().begin()));
}

TEST_CASE("mnist_deep on the engine matches the existing Model", "[nn_engine][mnist_deep]") {
    const bool hand_kernels = GENERATE(false, true);
    CAPTURE(hand_kernels);
    const int batch = 8;
    const auto model = zoo("mnist_deep");
    const auto no_dropout = without_dropout(model);
    worker::ModelShape shape;
    worker::ParameterSet params(shape), grads(shape);
    params.init_tutorial(3);
    worker::ModelConfig cfg;
    cfg.shape = shape;
    cfg.batch_size = batch;
    cfg.keep_prob = 1.0f;
    cfg.hand_kernels = hand_kernels;
    worker::Model reference(cfg, params, grads);
    random_batch(reference.input(), reference.labels(), 4);

    std::vector<float> engine_grads(grads.size(), -7.0f);
    auto net = Network::create(no_dropout, NetworkOptions{batch, Precision::kF32, false}, params.all(), engine_grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    auto& n = **net;
    std::copy(reference.input().begin(), reference.input().end(), n.input().begin());
    std::copy(reference.labels().begin(), reference.labels().end(), n.labels().begin());

    const float want = reference.train_step(9);
    const float got = n.train_step(9);
    CHECK(std::fabs(got - want) <= 1e-4 * std::fabs(want));
    const std::vector<float> want_grads(grads.all().begin(), grads.all().end());
    CHECK(rel_l2(engine_grads, want_grads) < 1e-4);
    for (const auto& t : grads.tensors()) {
        INFO(t.name);
        const std::vector<float> a(engine_grads.begin() + static_cast<std::ptrdiff_t>(t.offset),
                                   engine_grads.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size));
        const std::vector<float> b(want_grads.begin() + static_cast<std::ptrdiff_t>(t.offset),
                                   want_grads.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size));
        CHECK(rel_l2(a, b) < 1e-4);
    }

    // Inference with the real description (dropout keep 0.5 is the identity there).
    auto eval = Network::create(model, NetworkOptions{batch, Precision::kF32, true}, params.all(), {});
    REQUIRE(eval);
    std::copy(reference.input().begin(), reference.input().end(), (*eval)->input().begin());
    std::copy(reference.labels().begin(), reference.labels().end(), (*eval)->labels().begin());
    const float want_eval = reference.forward(false);
    CHECK(std::fabs((*eval)->forward(false) - want_eval) <= 1e-4 * std::fabs(want_eval));
    CHECK(std::equal(reference.predictions().begin(), reference.predictions().end(), (*eval)->predictions().begin()));
}

TEST_CASE("mnist_deep with dropout draws the Model's masks for the same seed", "[nn_engine][mnist_deep]") {
    const int batch = 8;
    worker::ModelShape shape;
    worker::ParameterSet params(shape), grads(shape);
    params.init_tutorial(5);
    worker::ModelConfig cfg;
    cfg.shape = shape;
    cfg.batch_size = batch;
    cfg.keep_prob = 0.5f;
    cfg.hand_kernels = false;
    worker::Model reference(cfg, params, grads);
    random_batch(reference.input(), reference.labels(), 6);
    std::vector<float> engine_grads(grads.size());
    auto net = Network::create(zoo("mnist_deep"), NetworkOptions{batch, Precision::kF32, false}, params.all(), engine_grads);
    REQUIRE(net);
    std::copy(reference.input().begin(), reference.input().end(), (*net)->input().begin());
    std::copy(reference.labels().begin(), reference.labels().end(), (*net)->labels().begin());
    for (std::uint64_t seed : {11u, 12u}) {
        const float want = reference.train_step(seed);
        const float got = (*net)->train_step(seed);
        CHECK(std::fabs(got - want) <= 1e-4 * std::fabs(want));
        CHECK(rel_l2(engine_grads, std::vector<float>(grads.all().begin(), grads.all().end())) < 1e-4);
    }
}

// Ten classes, each a fixed random 28x28 pattern; an example is 0.6 * its pattern + 0.4 * noise.
class SeparableData {
public:
    explicit SeparableData(std::uint64_t seed) : rng_(seed) {
        for (auto& p : prototypes_) {
            p.resize(784);
            for (auto& v : p) v = static_cast<float>(rng_.uniform());
        }
    }
    void fill(std::span<float> images, std::span<std::int32_t> labels) {
        for (std::size_t b = 0; b < labels.size(); ++b) {
            const auto label = rng_.below(10);
            labels[b] = static_cast<std::int32_t>(label);
            for (std::size_t i = 0; i < 784; ++i)
                images[b * 784 + i] = 0.6f * prototypes_[label][i] + 0.4f * static_cast<float>(rng_.uniform());
        }
    }

private:
    worker::Rng rng_;
    std::array<std::vector<float>, 10> prototypes_;
};

TEST_CASE("plain SGD on the engine lowers the loss of zoo models", "[nn_engine][train]") {
    struct Case {
        const char* name;
        float learning_rate;
    };
    // dls_mlp sums the loss over the batch: its rate is per example.
    const auto c = GENERATE(Case{"mnist_softmax", 0.5f}, Case{"dls_mlp", 0.1f / 32}, Case{"lenet5", 0.1f});
    CAPTURE(c.name);
    const auto model = zoo(c.name);
    const int batch = 32, steps = 200;
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count)), grads(params.size());
    initialize_parameters(model, 5, params);
    auto net = Network::create(model, NetworkOptions{batch, Precision::kF32, false}, params, grads);
    REQUIRE(net);
    auto& n = **net;
    SeparableData data(6);
    double first = 0, last = 0;
    for (int step = 0; step < steps; ++step) {
        data.fill(n.input(), n.labels());
        const float loss = n.train_step(static_cast<std::uint64_t>(step));
        REQUIRE(std::isfinite(loss));
        if (step < 10) first += loss / 10.0;
        if (step >= steps - 10) last += loss / 10.0;
        for (std::size_t i = 0; i < params.size(); ++i) params[i] -= c.learning_rate * grads[i];
    }
    INFO("first 10 steps " << first << ", last 10 " << last);
    CHECK(last < 0.25 * first);
    data.fill(n.input(), n.labels());
    n.forward(false);
    int correct = 0;
    for (int b = 0; b < batch; ++b) correct += n.predictions()[static_cast<std::size_t>(b)] == n.labels()[static_cast<std::size_t>(b)];
    CHECK(correct >= batch * 9 / 10);
}

}  // namespace
}  // namespace psrun::nn::test

namespace psrun::nn::test {
namespace {

TEST_CASE("mnist_deep in bf16 stays close to the f32 Model; lenet5 trains in bf16", "[nn_engine][bf16]") {
    if (!engine_bf16_supported()) {
        WARN("no native bf16 on this CPU: skipped");
        return;
    }
    const int batch = 8;
    worker::ModelShape shape;
    worker::ParameterSet params(shape), grads(shape);
    params.init_tutorial(3);
    worker::ModelConfig cfg;
    cfg.shape = shape;
    cfg.batch_size = batch;
    cfg.keep_prob = 1.0f;
    cfg.hand_kernels = false;
    worker::Model reference(cfg, params, grads);
    random_batch(reference.input(), reference.labels(), 4);
    std::vector<float> engine_grads(grads.size(), -7.0f);
    auto net = Network::create(without_dropout(zoo("mnist_deep")), NetworkOptions{batch, Precision::kBf16, false},
                               params.all(), engine_grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(reference.input().begin(), reference.input().end(), (*net)->input().begin());
    std::copy(reference.labels().begin(), reference.labels().end(), (*net)->labels().begin());
    const float want = reference.train_step(1);
    const float got = (*net)->train_step(1);
    CHECK(std::fabs(got - want) <= 2e-2 * std::fabs(want));
    const std::vector<float> want_grads(grads.all().begin(), grads.all().end());
    const double err = rel_l2(engine_grads, want_grads);
    // The existing Model's own bf16 mode, as the yardstick of what bf16 costs here.
    worker::ParameterSet model_bf16_grads(shape);
    cfg.precision = worker::Precision::kBf16;
    worker::Model reference_bf16(cfg, params, model_bf16_grads);
    std::copy(reference.input().begin(), reference.input().end(), reference_bf16.input().begin());
    std::copy(reference.labels().begin(), reference.labels().end(), reference_bf16.labels().begin());
    reference_bf16.train_step(1);
    const double model_err = rel_l2(std::vector<float>(model_bf16_grads.all().begin(), model_bf16_grads.all().end()), want_grads);
    INFO("bf16 gradient relative L2 error: engine " << err << ", Model " << model_err);
    CHECK(err < 6e-2);
    CHECK(err < 2 * model_err + 1e-2);
    CHECK(std::count(engine_grads.begin(), engine_grads.end(), -7.0f) == 0);

    const auto model = zoo("lenet5");
    std::vector<float> p(static_cast<std::size_t>(model.parameter_count)), g(p.size());
    initialize_parameters(model, 5, p);
    auto lenet = Network::create(model, NetworkOptions{32, Precision::kBf16, false}, p, g);
    REQUIRE(lenet);
    SeparableData data(6);
    double first = 0, last = 0;
    for (int step = 0; step < 150; ++step) {
        data.fill((*lenet)->input(), (*lenet)->labels());
        const float loss = (*lenet)->train_step(static_cast<std::uint64_t>(step));
        REQUIRE(std::isfinite(loss));
        if (step < 10) first += loss / 10.0;
        if (step >= 140) last += loss / 10.0;
        for (std::size_t i = 0; i < p.size(); ++i) p[i] -= 0.1f * g[i];
    }
    INFO("lenet5 bf16: first 10 steps " << first << ", last 10 " << last);
    CHECK(last < 0.25 * first);
}

}  // namespace
}  // namespace psrun::nn::test
