// The Network: finite-difference gradients of tiny networks (every kind, odd shapes, stride
// 2), gradient buffer switching, profiling, forward-only, build errors, and parameter init.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "test/nn/engine_test_util.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

struct Built {
    ModelDescription model;
    std::vector<float> params, grads;
    std::unique_ptr<Network> net;
};

Built build(const ModelDescription& model, std::int64_t batch, std::uint64_t seed,
            Precision precision = Precision::kF32) {
    Built b{model, std::vector<float>(static_cast<std::size_t>(model.parameter_count)),
            std::vector<float>(static_cast<std::size_t>(model.parameter_count), -7.0f), nullptr};
    initialize_parameters(model, seed, b.params);
    auto net = Network::create(model, NetworkOptions{batch, precision, false}, b.params, b.grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    b.net = std::move(*net);
    const auto x = random_vector(b.net->input().size(), seed + 1);
    std::copy(x.begin(), x.end(), b.net->input().begin());
    psrun::Rng rng(seed + 2);
    for (auto& l : b.net->labels()) l = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(model.classes)));
    return b;
}

// Central differences of the loss (dropout masks fixed by the seed) for every parameter, each
// the estimate of central_difference() closest to the analytic gradient `analytic`.
std::vector<double> finite_differences(Built& b, std::uint64_t seed, const std::vector<float>& analytic) {
    std::vector<double> g(b.params.size());
    for (std::size_t i = 0; i < b.params.size(); ++i)
        g[i] = central_difference(
            b.params[i], analytic[i], [&] { return static_cast<double>(b.net->forward(true, seed)); }, 5e-4f);
    return g;
}

const json kSmooth = json::array({
    {{"kind", "conv2d"},
     {"filters", 3},
     {"kernel", 3},
     {"stride", 2},
     {"padding", "same"},
     {"weight_init", "he_normal"},
     {"bias_init", {{"kind", "uniform"}, {"limit", 0.2}}}},
    {{"kind", "tanh"}},
    {{"kind", "avg_pool"}, {"window", 2}, {"padding", "same"}},
    {{"kind", "conv2d"}, {"filters", 2}, {"kernel", json::array({2, 1})}, {"padding", "valid"}},
    {{"kind", "sigmoid"}},
    {{"kind", "dense"}, {"units", 5}, {"bias_init", {{"kind", "normal"}, {"stddev", 0.3}}}},
    {{"kind", "tanh"}},
});

const json kRelu = json::array({
    {{"kind", "conv2d"}, {"filters", 4}, {"kernel", 3}, {"padding", "same"}},
    {{"kind", "relu"}},
    {{"kind", "max_pool"}, {"window", 3}, {"stride", 2}, {"padding", "same"}},
    {{"kind", "dense"}, {"units", 6}, {"bias_init", {{"kind", "constant"}, {"value", 0.1}}}},
    {{"kind", "relu"}},
    {{"kind", "dropout"}, {"keep_prob", 0.7}},
    {{"kind", "dense"}, {"units", 5}},
    {{"kind", "relu"}},
});

// Parameterless layers first (no data gradient there), dropout on an image, dense after it.
const json kPoolFirst = json::array({
    {{"kind", "max_pool"}, {"window", 2}, {"padding", "same"}},
    {{"kind", "sigmoid"}},
    {{"kind", "dropout"}, {"keep_prob", 0.5}},
    {{"kind", "dense"}, {"units", 4}, {"bias", false}},
    {{"kind", "tanh"}},
});

TEST_CASE("network gradients match central differences", "[nn_engine][network]") {
    const auto layers = GENERATE(kSmooth, kRelu, kPoolFirst);
    const auto reduction = GENERATE("mean", "sum");
    CAPTURE(layers.dump(), reduction);
    const auto model = model_from(layers, 2, 9, 7, 3, reduction);
    auto b = build(model, 3, 11);
    const float loss = b.net->train_step(5);
    REQUIRE(std::isfinite(loss));
    REQUIRE(b.net->forward(true, 5) == Approx(loss).epsilon(1e-6));
    const auto fd = finite_differences(b, 5, b.grads);
    // Every gradient entry written (the buffer started at -7).
    CHECK(std::count(b.grads.begin(), b.grads.end(), -7.0f) == 0);
    CHECK(rel_l2(b.grads, fd) < 1e-2);
}

TEST_CASE("set_gradient_buffer redirects the next steps' gradients", "[nn_engine][network]") {
    const auto model = model_from(kRelu, 2, 9, 7);
    auto b = build(model, 3, 12);
    b.net->train_step(1);
    const auto first = b.grads;
    std::vector<float> other(b.grads.size(), -7.0f);
    std::fill(b.grads.begin(), b.grads.end(), 0.5f);
    b.net->set_gradient_buffer(other);
    b.net->train_step(1);
    CHECK(other == first);
    CHECK(std::all_of(b.grads.begin(), b.grads.end(), [](float v) { return v == 0.5f; }));
    std::vector<float> short_buffer(other.size() - 1);
    CHECK_THROWS_AS(b.net->set_gradient_buffer(short_buffer), std::invalid_argument);
    CHECK_FALSE(b.net->implementations().empty());
    b.net->labels()[1] = 3;  // 3 classes: 0..2
    CHECK_THROWS_AS(b.net->train_step(1), std::out_of_range);
}

TEST_CASE("profiling reports every layer and the loss by index and kind", "[nn_engine][network]") {
    const auto model = model_from(kRelu, 2, 9, 7);
    auto b = build(model, 3, 13);
    b.net->set_profiling(true);
    for (int i = 0; i < 3; ++i) b.net->train_step(static_cast<std::uint64_t>(i));
    const auto& t = b.net->layer_times();
    // conv2d+relu, max_pool, dense+relu, dropout, dense+relu, dense, loss.
    REQUIRE(t.size() == 7);
    CHECK(t[0].index == 0);
    CHECK(t[0].kind == "conv2d+relu");
    CHECK(t[1].index == 2);
    CHECK(t[1].kind == "max_pool");
    CHECK(t[2].kind == "dense+relu");
    CHECK(t[3].kind == "dropout");
    CHECK(t[3].index == 5);
    CHECK(t[6].kind == "loss");
    for (const auto& lt : t) CHECK(lt.forward_ms > 0);
    CHECK(t[2].backward_ms > 0);
    b.net->reset_layer_times();
    CHECK(b.net->layer_times()[0].forward_ms == 0);
}

TEST_CASE("forward-only network: no gradient buffer, predictions are the arg-max", "[nn_engine][network]") {
    const auto model = model_from(kSmooth, 2, 9, 7, 4);
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    initialize_parameters(model, 3, params);
    auto net = Network::create(model, NetworkOptions{5, Precision::kF32, true}, params, {});
    REQUIRE(net);
    auto& n = **net;
    const auto x = random_vector(n.input().size(), 4);
    std::copy(x.begin(), x.end(), n.input().begin());
    const float loss = n.forward(false);
    CHECK(std::isfinite(loss));
    REQUIRE(n.predictions().size() == 5);
    for (auto p : n.predictions()) CHECK((p >= 0 && p < 4));
}

TEST_CASE("a layer oneDNN cannot build is an error naming the layer and its shapes", "[nn_engine][network]") {
    auto model = model_from(kRelu, 2, 9, 7);
    model.nodes[2].attrs["window"] = {40, 40};  // inconsistent with the inferred output shape
    model.nodes[2].attrs["padding"] = "valid";
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count)), grads(params.size());
    auto net = Network::create(model, NetworkOptions{2, Precision::kF32, false}, params, grads);
    REQUIRE_FALSE(net);
    CHECK_THAT(net.error().message,
               Catch::StartsWith("layer 2 (max_pool \"max_pool1\"): input N x 4 x 9 x 7, output N x 4 x 5 x 4"));

    params.push_back(0.0f);
    auto wrong = Network::create(model_from(kRelu, 2, 9, 7), NetworkOptions{2, Precision::kF32, false}, params, grads);
    REQUIRE_FALSE(wrong);
    CHECK(wrong.error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("initialize_parameters follows the initializers", "[nn_engine][init]") {
    const auto model = model_from(
        json::array({
            {{"kind", "conv2d"},
             {"filters", 8},
             {"kernel", 3},
             {"weight_init", "he_normal"},
             {"bias_init", {{"kind", "constant"}, {"value", 0.25}}}},
            {{"kind", "dense"}, {"units", 50}, {"weight_init", {{"kind", "truncated_normal"}, {"stddev", 0.1}}}},
            {{"kind", "dense"}, {"units", 3}, {"weight_init", {{"kind", "uniform"}, {"limit", 0.05}}}},
        }),
        4, 9, 9);
    std::vector<float> p(static_cast<std::size_t>(model.parameter_count)), q(p.size());
    initialize_parameters(model, 9, p);
    initialize_parameters(model, 9, q);
    CHECK(p == q);
    initialize_parameters(model, 10, q);
    CHECK(p != q);
    // Tensors in layer order, weights before bias: conv, fc1, fc2 (the output layer).
    REQUIRE(model.tensors.size() == 6);
    const auto at = [&](std::size_t t) { return static_cast<std::size_t>(model.tensors[t].offset); };
    const auto size = [&](std::size_t t) { return static_cast<std::size_t>(model.tensors[t].size); };
    const double he = std::sqrt(2.0 / (4 * 9));
    for (std::size_t i = 0; i < size(0); ++i) CHECK(std::fabs(p[at(0) + i]) <= 2 * he + 1e-6);
    for (std::size_t i = 0; i < 8; ++i) CHECK(p[at(1) + i] == 0.25f);
    double sum2 = 0;
    for (std::size_t i = 0; i < size(2); ++i) {
        REQUIRE(std::fabs(p[at(2) + i]) <= 0.2f + 1e-6f);
        sum2 += double(p[at(2) + i]) * p[at(2) + i];
    }
    CHECK(std::sqrt(sum2 / static_cast<double>(size(2))) ==
          Approx(0.088).margin(0.006));  // truncation shrinks the stddev
    for (std::size_t i = 0; i < size(3); ++i) CHECK(p[at(3) + i] == 0.0f);
    for (std::size_t i = 0; i < size(4); ++i) CHECK(std::fabs(p[at(4) + i]) <= 0.05f);
    // fc2's bias has the default zeros; glorot_uniform (the default weights) has the limit
    // sqrt(6 / (fan_in + fan_out)): fc1's 50 x 324 would allow 0.126.
    for (std::size_t i = 0; i < size(5); ++i) CHECK(p[at(5) + i] == 0.0f);
    const auto other =
        parse_model({{"input", {{"channels", 4}, {"height", 9}, {"width", 9}}},
                     {"classes", 3},
                     {"layers", {{{"kind", "dense"}, {"units", 50}}, {{"kind", "dense"}, {"units", 3}}}}},
                    "glorot");
    REQUIRE(other);
    std::vector<float> g(static_cast<std::size_t>(other->parameter_count));
    initialize_parameters(*other, 9, g);
    const double limit = std::sqrt(6.0 / (324.0 + 50.0));
    double largest = 0;
    for (std::int64_t i = 0; i < other->tensors[0].size; ++i)
        largest = std::max(largest, double(std::fabs(g[static_cast<std::size_t>(i)])));
    CHECK(largest <= limit);
    CHECK(largest > 0.9 * limit);
}

}  // namespace
}  // namespace psrun::nn::test
