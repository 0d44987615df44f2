// pow and the hand math functions (workerd/nn/ops/math.cpp, hand_math.h: erf, sin, cos, tan,
// the inverse and hyperbolic functions, sign, floor, ceil, round): forward against <cmath>,
// gradients against central differences, bf16 against f32, and the field and type errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "test/nn/ops_test_util.h"
#include "workerd/nn/ops/hand_math.h"

namespace psrun::nn::test::ops_math_test {
namespace {

using nlohmann::json;

double sigmoid(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST_CASE("pow raises to a constant exponent: square, odd, fractional (on a positive input)",
          "[nn_engine][ops][math]") {
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

TEST_CASE("sin and cos against std::sin / std::cos, their gradients and bf16", "[nn_engine][ops][math]") {
    const std::string kind = GENERATE("sin", "cos");
    const int batch = GENERATE(1, 3);
    INFO(kind << " batch " << batch);
    // Scaled by 4 first: the inputs cover more than a half period.
    const json layers = {{{"kind", "constant"}, {"name", "four"}, {"shape", json::array()}, {"values", {4.0}}},
                         {{"kind", "mul"}, {"name", "x4"}, {"inputs", {"input", "four"}}},
                         {{"kind", kind}, {"name", "out"}}};
    const auto model = graph_model(layers, {4, 6});
    const auto r = forward_of(model, batch, 21);
    std::vector<double> expected;
    for (const float x : r.input) expected.push_back(kind == "sin" ? std::sin(4.0 * x) : std::cos(4.0 * x));
    check_close(r.output, expected);
    check_gradients(model, batch, 23);
    check_bf16_against_f32(model, batch, 25);
}

TEST_CASE("tan, asin, acos, atan, sinh, cosh, asinh, acosh, atanh against <cmath>, gradients and bf16",
          "[nn_engine][ops][math]") {
    const std::string kind = GENERATE("tan", "asin", "acos", "atan", "sinh", "cosh", "asinh", "acosh", "atanh");
    const int batch = GENERATE(1, 3);
    INFO(kind << " batch " << batch);
    // tanh(input) * 0.8 stays inside (-0.8, 0.8): asin's, acos's and atanh's (-1, 1), tan's
    // (-pi/2, pi/2); acosh reads it plus 2, inside (1, inf).
    const double shift = kind == "acosh" ? 2.0 : 0.0;
    const json layers = {{{"kind", "constant"}, {"name", "scale"}, {"shape", json::array()}, {"values", {0.8}}},
                         {{"kind", "constant"}, {"name", "shift"}, {"shape", json::array()}, {"values", {shift}}},
                         {{"kind", "tanh"}, {"name", "t"}, {"inputs", {"input"}}},
                         {{"kind", "mul"}, {"name", "xs"}, {"inputs", {"t", "scale"}}},
                         {{"kind", "add"}, {"name", "x"}, {"inputs", {"xs", "shift"}}},
                         {{"kind", kind}, {"name", "out"}}};
    const auto model = graph_model(layers, {4, 5});
    const auto r = forward_of(model, batch, 41);
    std::vector<double> expected;
    for (const float in : r.input) {
        const double x = std::tanh(double{in}) * 0.8 + shift;
        expected.push_back(kind == "tan"     ? std::tan(x)
                           : kind == "asin"  ? std::asin(x)
                           : kind == "acos"  ? std::acos(x)
                           : kind == "atan"  ? std::atan(x)
                           : kind == "sinh"  ? std::sinh(x)
                           : kind == "cosh"  ? std::cosh(x)
                           : kind == "asinh" ? std::asinh(x)
                           : kind == "acosh" ? std::acosh(x)
                                             : std::atanh(x));
    }
    check_close(r.output, expected);
    check_gradients(model, batch, 43);
    check_bf16_against_f32(model, batch, 45);
}

TEST_CASE("floor, ceil and round (halves to even): step functions without a gradient", "[nn_engine][ops][math]") {
    const std::string kind = GENERATE("floor", "ceil", "round");
    INFO(kind);
    // x * 3.7 - 0.37 crosses several steps (scaled by no power of two, so that no input lands on
    // a step, where central differences would jump); x + step(x) has x's gradient alone.
    const json layers = {{{"kind", "constant"}, {"name", "ten"}, {"shape", json::array()}, {"values", {3.7}}},
                         {{"kind", "constant"}, {"name", "five"}, {"shape", json::array()}, {"values", {0.37}}},
                         {{"kind", "mul"}, {"name", "xs"}, {"inputs", {"input", "ten"}}},
                         {{"kind", "sub"}, {"name", "x"}, {"inputs", {"xs", "five"}}},
                         {{"kind", kind}, {"name", "s"}, {"inputs", {"x"}}},
                         {{"kind", "add"}, {"name", "out"}, {"inputs", {"x", "s"}}}};
    const auto model = graph_model(layers, {6, 5});
    const auto r = forward_of(model, 2, 51);
    std::vector<double> expected;
    for (const float in : r.input) {
        const float x = in * 3.7f - 0.37f;
        expected.push_back(x + (kind == "floor" ? std::floor(x) : kind == "ceil" ? std::ceil(x) : std::nearbyint(x)));
    }
    check_close(r.output, expected);
    // A central difference across a step sees its jump: a few of the 24 coordinates may.
    check_gradients(model, 2, 53, 24, 2e-2, 4);
    const json alone = {{{"kind", "round"}, {"name", "out"}}};
    const auto halves = graph_model(alone, {4});
    CHECK(find_hand_math("round")->forward(2.5f) == 2.0f);
    CHECK(find_hand_math("round")->forward(-0.5f) == 0.0f);
    CHECK(find_hand_math("round")->forward(3.5f) == 4.0f);
    CHECK(halves.value("out").dims.size() == 2);
}

TEST_CASE("sign: -1, 0, 1 forward, no gradient of its own (x * sign(x) is |x|)", "[nn_engine][ops][math]") {
    const int batch = GENERATE(1, 3);
    // sign(x - 0.5): the inputs (uniform [0, 1) or so) fall on both sides.
    const json layers = {{{"kind", "constant"}, {"name", "half"}, {"shape", json::array()}, {"values", {0.5}}},
                         {{"kind", "sub"}, {"name", "c"}, {"inputs", {"input", "half"}}},
                         {{"kind", "sign"}, {"name", "s"}, {"inputs", {"c"}}},
                         {{"kind", "mul"}, {"name", "out"}, {"inputs", {"c", "s"}}}};
    const auto model = graph_model(layers, {5, 4});
    const auto r = forward_of(model, batch, 31);
    std::vector<double> expected;
    for (const float x : r.input) expected.push_back(std::abs(double{x} - 0.5));
    check_close(r.output, expected);
    // A gradient through sign would add to |x|'s: the central differences tell.
    check_gradients(model, batch, 33);
    const json alone = {{{"kind", "sign"}, {"name", "out"}}};
    const auto signs = forward_of(graph_model(alone, {7}), batch, 35);
    for (std::size_t i = 0; i < signs.input.size(); ++i) {
        const float x = signs.input[i];
        CHECK(signs.output[i] == (x > 0 ? 1.0f : x < 0 ? -1.0f : 0.0f));
    }
}

TEST_CASE("pow and erf: a missing exponent, integer inputs", "[nn_engine][ops][math]") {
    CHECK_THAT(graph_error({{{"kind", "sin"}}}, {3}, "int"),
               Catch::Contains("layer 0 (sin): expects floats, got integer ids"));
    CHECK_THAT(graph_error({{{"kind", "pow"}}}, {3}), Catch::Contains("exponent"));
    CHECK_THAT(graph_error({{{"kind", "pow"}, {"exponent", "two"}}}, {3}), Catch::Contains("exponent"));
    CHECK_THAT(graph_error({{{"kind", "erf"}}}, {3}, "int"),
               Catch::Contains("layer 0 (erf): expects floats, got integer ids"));
}

}  // namespace
}  // namespace psrun::nn::test::ops_math_test
