// Whole models on the engine: mnist_deep from the zoo against a naive double-precision
// reference (same parameters and batch, dropout keep 1: same loss and gradients, which proves
// the plain layouts and NHWC flattening of the wire format), with and without the hand
// kernels, f32 and bf16; and
// short SGD runs that lower the loss of dls_mlp, mnist_softmax and lenet5 on a generated,
// separable 10-class dataset.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "test/nn/engine_test_util.h"
#include "test/nn/mnist_deep_reference.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"
#include "workerd/parameter_set.h"

namespace psrun::nn::test {
namespace {

ModelDescription zoo(const char* name) {
    auto model = load_model(name);
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

ModelDescription without_dropout(ModelDescription model) {
    for (auto& n : model.nodes)
        if (n.op == "dropout") n.attrs["keep_prob"] = 1.0;
    return model;
}

void random_batch(std::span<float> images, std::span<std::int32_t> labels, std::uint64_t seed) {
    psrun::Rng rng(seed);
    for (auto& v : images) v = static_cast<float>(rng.uniform());
    for (auto& l : labels) l = static_cast<std::int32_t>(rng.below(10));
}

// The naive double-precision reference's gradients as one flat float vector.
std::vector<float> flat_grads(const worker::test::Reference& r) {
    std::vector<float> out;
    for (const auto& g : r.grads) out.insert(out.end(), g.begin(), g.end());
    return out;
}

TEST_CASE("mnist_deep on the engine matches the naive reference", "[nn_engine][mnist_deep]") {
    const bool hand_kernels = GENERATE(false, true);
    CAPTURE(hand_kernels);
    const int batch = 4;
    const auto model = zoo("mnist_deep");
    const auto no_dropout = without_dropout(model);
    worker::ParameterSet params(worker::model_tensors(model));
    initialize_parameters(model, 3, params.all());
    std::vector<float> engine_grads(params.size(), -7.0f);
    NetworkOptions options{batch, Precision::kF32, false};
    options.hand_kernels = hand_kernels;
    auto net = Network::create(no_dropout, options, params.all(), engine_grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    auto& n = **net;
    random_batch(n.input(), n.labels(), 4);
    const std::vector<float> x(n.input().begin(), n.input().end());
    const std::vector<std::int32_t> labels(n.labels().begin(), n.labels().end());
    const auto want = worker::test::reference_pass(worker::test::ModelShape{}, batch, x, labels, params);

    const float got = n.train_step(9);
    CHECK(std::fabs(got - want.loss) <= 1e-4 * std::fabs(want.loss));
    const std::vector<float> want_grads = flat_grads(want);
    REQUIRE(want_grads.size() == engine_grads.size());
    CHECK(rel_l2(engine_grads, want_grads) < 1e-4);
    for (const auto& t : params.tensors()) {
        INFO(t.name);
        const std::vector<float> a(engine_grads.begin() + static_cast<std::ptrdiff_t>(t.offset),
                                   engine_grads.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size));
        const std::vector<float> b(want_grads.begin() + static_cast<std::ptrdiff_t>(t.offset),
                                   want_grads.begin() + static_cast<std::ptrdiff_t>(t.offset + t.size));
        CHECK(rel_l2(a, b) < 1e-4);
    }

    // Inference with the real description (dropout keep 0.5 is the identity there).
    NetworkOptions eval_options{batch, Precision::kF32, true};
    eval_options.hand_kernels = hand_kernels;
    auto eval = Network::create(model, eval_options, params.all(), {});
    REQUIRE(eval);
    std::copy(x.begin(), x.end(), (*eval)->input().begin());
    std::copy(labels.begin(), labels.end(), (*eval)->labels().begin());
    CHECK(std::fabs((*eval)->forward(false) - want.loss) <= 1e-4 * std::fabs(want.loss));
    for (int b = 0; b < batch; ++b) {
        const auto* logits = &want.logits[static_cast<std::size_t>(b) * 10];
        const auto best = std::max_element(logits, logits + 10) - logits;
        CHECK((*eval)->predictions()[static_cast<std::size_t>(b)] == best);
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
    psrun::Rng rng_;
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
    for (int b = 0; b < batch; ++b)
        correct += n.predictions()[static_cast<std::size_t>(b)] == n.labels()[static_cast<std::size_t>(b)];
    CHECK(correct >= batch * 9 / 10);
}

}  // namespace
}  // namespace psrun::nn::test

namespace psrun::nn::test {
namespace {

TEST_CASE("mnist_deep in bf16 stays close to the f32 reference; lenet5 trains in bf16", "[nn_engine][bf16]") {
    if (!engine_bf16_supported()) {
        WARN("no native bf16 on this CPU: skipped");
        return;
    }
    const int batch = 4;
    const auto mnist_deep = without_dropout(zoo("mnist_deep"));
    worker::ParameterSet params(worker::model_tensors(mnist_deep));
    initialize_parameters(mnist_deep, 3, params.all());
    std::vector<float> engine_grads(params.size(), -7.0f);
    auto net = Network::create(mnist_deep, NetworkOptions{batch, Precision::kBf16, false}, params.all(), engine_grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    random_batch((*net)->input(), (*net)->labels(), 4);
    const std::vector<float> x((*net)->input().begin(), (*net)->input().end());
    const std::vector<std::int32_t> labels((*net)->labels().begin(), (*net)->labels().end());
    const auto want = worker::test::reference_pass(worker::test::ModelShape{}, batch, x, labels, params);
    const float got = (*net)->train_step(1);
    CHECK(std::fabs(got - want.loss) <= 2e-2 * std::fabs(want.loss));
    const double err = rel_l2(engine_grads, flat_grads(want));
    // bf16 keeps 8 bits of mantissa: ~1% per product, a few % over the long sums of fc1.
    INFO("bf16 gradient relative L2 error " << err);
    CHECK(err < 6e-2);
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
