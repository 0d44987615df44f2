// pow and erf (workerd/nn/ops/math.cpp): forward against std::pow / std::erf, gradients against
// central differences, bf16 against f32, and the field and type errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST_CASE("pow raises to a constant exponent: square, odd, fractional (on a positive input)", "[nn_engine][ops][math]") {
    const double e = GENERATE(2.0, 3.0, 0.5, -1.0);
    const int batch = GENERATE(1, 3);
    INFO("exponent " << e << " batch " << batch);
    // Fractional and negative exponents read sigmoid(x) + 0.5 (positive, away from 0).
    const bool shifted = e != 2.0 && e != 3.0;
    json layers = json::array();
    if (shifted) {
        layers.push_back({{"kind", "sigmoid"}, {"name", "s"}});
        layers.push_back({{"kind", "constant"}, {"name", "half"}, {"shape", json::array()}, {"values", {0.5}}});
        layers.push_back({{"kind", "add"}, {"name", "q"}, {"inputs", {"s", "half"}}});
    }
    layers.push_back({{"kind", "pow"}, {"name", "out"}, {"exponent", e}});
    const auto model = graph_model(layers, {3, 5, 7});
    for (const auto& n : model.nodes)
        if (n.name == "out") CHECK(n.attrs == json{{"exponent", e}});
    const auto r = forward_of(model, batch, 3);
    std::vector<double> expected;
    for (const float x : r.input) expected.push_back(std::pow(shifted ? sigmoid(x) + 0.5 : double{x}, e));
    check_close(r.output, expected);
    check_gradients(model, batch, 5);
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("erf against std::erf, its gradient and bf16", "[nn_engine][ops][math]") {
    const int batch = GENERATE(1, 3);
    // Scaled by 2 first so that the tails of erf are exercised.
    const json layers = {{{"kind", "constant"}, {"name", "two"}, {"shape", json::array()}, {"values", {2.0}}},
                         {{"kind", "mul"}, {"name", "x2"}, {"inputs", {"input", "two"}}},
                         {{"kind", "erf"}, {"name", "out"}}};
    const auto model = graph_model(layers, {5, 3});
    const auto r = forward_of(model, batch, 9);
    std::vector<double> expected;
    for (const float x : r.input) expected.push_back(std::erf(2.0 * x));
    check_close(r.output, expected);
    check_gradients(model, batch, 11);
    check_bf16_against_f32(model, batch, 13);
}

TEST_CASE("pow and erf: a missing exponent, integer inputs", "[nn_engine][ops][math]") {
    CHECK_THAT(graph_error({{{"kind", "pow"}}}, {3}), Catch::Contains("exponent"));
    CHECK_THAT(graph_error({{{"kind", "pow"}, {"exponent", "two"}}}, {3}), Catch::Contains("exponent"));
    CHECK_THAT(graph_error({{{"kind", "erf"}}}, {3}, "int"),
               Catch::Contains("layer 0 (erf): expects floats, got integer ids"));
}

}  // namespace
}  // namespace psrun::nn::test
