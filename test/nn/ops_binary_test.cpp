// add, sub, mul, div (workerd/nn/ops/binary.cpp): numpy broadcasting either way round (the
// per-channel, swapped, expanded and same-shape paths of the kernel), scalars, a value used
// twice; forward against a naive loop, gradients against central differences, bf16 against
// f32; and the shape errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "test/nn/ops_test_util.h"
#include "workerd/nn/ops/broadcast.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

double apply(const std::string& op, double a, double b) {
    if (op == "add") return a + b;
    if (op == "sub") return a - b;
    if (op == "mul") return a * b;
    return a / b;
}

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

struct BinCase {
    std::string op;
    std::vector<std::int64_t> x, p;  // the input's dims after N, the parameter's
    bool param_first;
    int batch;
};

// The divisor passes through sigmoid + 0.5 (kept away from 0).
json case_layers(const BinCase& c) {
    json layers = {{{"kind", "parameter"}, {"name", "p"}, {"shape", c.p}}};
    const bool div = c.op == "div";
    const std::string x = div && c.param_first ? "q" : "input", p = div && !c.param_first ? "q" : "p";
    if (div) {
        layers.push_back({{"kind", "sigmoid"}, {"name", "s"}, {"inputs", {c.param_first ? "input" : "p"}}});
        layers.push_back({{"kind", "constant"}, {"name", "half"}, {"shape", json::array()}, {"values", {0.5}}});
        layers.push_back({{"kind", "add"}, {"name", "q"}, {"inputs", {"s", "half"}}});
    }
    layers.push_back({{"kind", c.op}, {"name", "out"}, {"inputs", c.param_first ? json{p, x} : json{x, p}}});
    return layers;
}

std::vector<double> reference(const BinCase& c, const ModelDescription& model, const ForwardRun& r) {
    std::vector<std::int64_t> xd = {c.batch};
    xd.insert(xd.end(), c.x.begin(), c.x.end());
    auto out_info = model.value("out");
    const auto od = concrete(out_info.dims, c.batch);
    const auto pv = tensor_values(model, r.params, "p/value");
    std::vector<double> out;
    for (std::int64_t e = 0; e < count_of(od); ++e) {
        const auto coords = coords_of(e, od);
        double x = r.input[static_cast<std::size_t>(broadcast_source(coords, xd))];
        double p = pv[static_cast<std::size_t>(broadcast_source(coords, c.p))];
        if (c.op == "div") (c.param_first ? x : p) = sigmoid(c.param_first ? x : p) + 0.5;
        out.push_back(c.param_first ? apply(c.op, p, x) : apply(c.op, x, p));
    }
    return out;
}

TEST_CASE("binary kinds broadcast either input, against a naive loop, finite differences and bf16",
          "[nn_engine][ops][binary]") {
    const auto c =
        GENERATE(BinCase{"add", {3, 4, 5}, {3, 1, 1}, false, 3},  // per channel
                 BinCase{"add", {3, 4, 5}, {3, 1, 1}, true, 1},   // swapped
                 BinCase{"sub", {4, 5}, {5}, true, 3},            // swapped, negated
                 BinCase{"sub", {2, 3}, {1, 3}, false, 1}, BinCase{"mul", {1, 4}, {3, 1}, false, 3},  // both broadcast
                 BinCase{"mul", {3, 4, 5}, {4, 1}, true, 1}, BinCase{"add", {2, 3}, {1}, true, 3},
                 BinCase{"div", {3, 5}, {5}, false, 3}, BinCase{"div", {3, 5}, {1}, true, 3},  // dividend broadcast
                 BinCase{"div", {1, 5}, {4, 1}, true, 1},                                      // both broadcast
                 BinCase{"mul", {3, 4}, {}, false, 3}, BinCase{"div", {3, 5}, {}, true, 3});   // a scalar parameter
    INFO(c.op << (c.param_first ? "(p, x)" : "(x, p)") << " batch " << c.batch);
    const auto model = graph_model(case_layers(c), c.x);
    const auto r = forward_of(model, c.batch, 11);
    check_close(r.output, reference(c, model, r));
    check_gradients(model, c.batch, 21);
    check_bf16_against_f32(model, c.batch, 31);
}

TEST_CASE("binary kinds on equal shapes keep the producer's layout; a value read twice accumulates",
          "[nn_engine][ops][binary]") {
    const std::string op = GENERATE("add", "sub", "mul", "div");
    INFO(op);
    // conv output (blocked) op tanh of it; mul also squares a value (both inputs one value).
    json layers = {{{"kind", "conv2d"}, {"name", "c"}, {"filters", 16}, {"kernel", 3}, {"padding", "same"}},
                   {{"kind", "tanh"}, {"name", "t"}, {"inputs", "c"}},
                   {{"kind", "sigmoid"}, {"name", "s"}, {"inputs", "c"}},
                   {{"kind", "constant"}, {"name", "half"}, {"shape", json::array()}, {"values", {0.5}}},
                   {{"kind", "add"}, {"name", "q"}, {"inputs", {"s", "half"}}},
                   {{"kind", op},
                    {"name", "out"},
                    {"inputs", op == "mul"   ? json{"c", "c"}
                               : op == "div" ? json{"t", "q"}
                                             : json{"c", "t"}}}};
    const auto model = graph_model(layers, {2, 5, 6});
    check_gradients(model, 3, 41);
    check_bf16_against_f32(model, 2, 43);
    // Forward against the same ops on the conv's output, computed by the engine as the model's output.
    auto plain = graph_model({layers[0]}, {2, 5, 6});
    const auto r = forward_of(model, 2, 51);
    const auto c = forward_of(plain, 2, 51);
    REQUIRE(c.output.size() == r.output.size());
    std::vector<double> expected;
    for (const float v : c.output) {
        const double t = std::tanh(v), q = sigmoid(v) + 0.5;
        expected.push_back(op == "mul" ? double{v} * v : op == "div" ? t / q : apply(op, v, t));
    }
    check_close(r.output, expected, 2e-5);
}

TEST_CASE("add and sub + relu on equal shapes run as one primitive with a relu post-op", "[nn_engine][ops][binary]") {
    // relu(x op tanh(x)): both inputs N x 4 x 3 x 5, so the pair fuses (a residual block's end).
    const std::string op = GENERATE("add", "sub");
    const int batch = GENERATE(1, 3);
    CAPTURE(op, batch);
    const auto model = graph_model({{{"kind", "tanh"}, {"name", "t"}},
                                    {{"kind", op}, {"name", "s"}, {"inputs", {"input", "t"}}},
                                    {{"kind", "relu"}, {"name", "out"}}},
                                   {4, 3, 5});
    std::vector<float> params, grads;
    auto net = Network::create(model, NetworkOptions{batch, Precision::kF32, false}, params, grads);
    REQUIRE(net);
    const auto labels = (*net)->kernel_labels();
    CHECK(std::find(labels.begin(), labels.end(), op + "+relu") != labels.end());
    const auto r = forward_of(model, batch, 3);
    std::vector<double> expected;
    for (const float x : r.input) expected.push_back(std::max(0.0, apply(op, x, std::tanh(static_cast<double>(x)))));
    check_close(r.output, expected);
    // The same graph with an identity between the pair (not fused) gives the same gradient;
    // central differences allow one sampled coordinate next to the relu's kink at 0.
    const auto apart = graph_model({{{"kind", "tanh"}, {"name", "t"}},
                                    {{"kind", op}, {"name", "s"}, {"inputs", {"input", "t"}}},
                                    {{"kind", "identity"}, {"name", "i"}},
                                    {{"kind", "relu"}, {"name", "out"}}},
                                   {4, 3, 5});
    auto input_gradient = [&](const ModelDescription& m) {
        std::vector<float> none;
        auto n = Network::create(m, NetworkOptions{batch, Precision::kF32, false, false, true}, none, none);
        REQUIRE(n);
        const auto kinds = (*n)->kernel_labels();
        const bool fused = std::find(kinds.begin(), kinds.end(), op + "+relu") != kinds.end();
        CHECK(fused == (&m == &model));
        std::copy(r.input.begin(), r.input.end(), (*n)->input().begin());
        (*n)->forward(true);
        (*n)->backward_from(std::vector<float>(r.input.size(), 1.0f));
        return std::vector<float>((*n)->input_gradient().begin(), (*n)->input_gradient().end());
    };
    CHECK(input_gradient(model) == input_gradient(apart));
    check_gradients(model, batch, 5, 24, 2e-2, 1);
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("binary kinds: errors name the shapes, integer inputs and the input count", "[nn_engine][ops][binary]") {
    // Integer add, sub and mul are integers (position ids); integers with floats are refused.
    CHECK_THAT(graph_error({{{"kind", "constant"}, {"name", "h"}, {"shape", {5}}, {"values", {1, 2, 3, 4, 5}}},
                            {{"kind", "add"}, {"inputs", {"input", "h"}}}},
                           {5}, "int"),
               Catch::Contains("layer 1 (add): expects floats; input 0 (input) holds integer ids"));
    CHECK_THAT(graph_error({{{"kind", "parameter"}, {"name", "p"}, {"shape", {5}}},
                            {{"kind", "mul"}, {"inputs", {"input", "p"}}}},
                           {3, 4}),
               Catch::Contains("layer 1 (mul): shapes N x 3 x 4 and 5 do not broadcast"));
    CHECK_THAT(graph_error({{{"kind", "sub"}}}, {3}), Catch::Contains("field \"inputs\": takes 2 inputs, got 1"));
    const Dims n3{Dim::batch_times(1), Dim::of(3)};
    CHECK_FALSE(broadcast_dims(n3, Dims{Dim::batch_times(2), Dim::of(3)}));
    CHECK_FALSE(broadcast_dims(n3, Dims{Dim::of(2), Dim::of(1)}));
    CHECK(*broadcast_dims(Dims{Dim::batch_times(1), Dim::of(1)}, Dims{Dim::of(4)}) ==
          Dims{Dim::batch_times(1), Dim::of(4)});
    CHECK(*broadcast_dims(Dims{}, n3) == n3);
}

}  // namespace
}  // namespace psrun::nn::test
