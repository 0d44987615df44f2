// layer_norm (workerd/nn/ops/layer_norm*.cpp) against a naive reference loop: forward and
// gradients over the last dim or several, with and without scale and bias, batch 1 and 3, the
// batch axis elsewhere ([L, N, E]); finite differences and bf16; the description's errors.
#include <catch2/catch.hpp>

#include <cstring>

#include "test/nn/engine_test_util.h"
#include "test/nn/reference_norm.h"

namespace psrun::nn::test::ops_layer_norm_test {
namespace {

using nlohmann::json;

struct LnCase {
    std::vector<std::int64_t> shape;
    int axis;
    std::int64_t batch;
    bool scale, center;
    bool seq_first;  // transposed to [L, N, E] around the layer
};

std::string parse_error(const json& layers, const std::vector<std::int64_t>& shape, const char* type = "float") {
    const json doc{
        {"input", {{"shape", shape}, {"type", type}}}, {"layers", layers}, {"loss", {{"kind", "mean_squared_error"}}}};
    auto m = parse_model(doc, "F");
    REQUIRE_FALSE(m);
    CHECK(m.error().code == ErrorCode::kInvalidArgument);
    return m.error().message;
}

}  // namespace

TEST_CASE("layer_norm matches the reference loop, forward and gradients", "[nn_engine][norm][layer_norm]") {
    const auto lc = GENERATE(values<LnCase>({{{4, 6}, -1, 3, true, true, false},
                                             {{4, 6}, -1, 1, true, true, false},
                                             {{4, 6}, -2, 3, true, false, false},
                                             {{10}, -1, 3, false, true, false},
                                             {{3, 2, 5}, 1, 3, true, true, false},
                                             {{5, 7}, -1, 3, false, false, false},
                                             {{4, 6}, -1, 3, true, true, true}}));
    const auto precision = GENERATE(from_range(test_precisions("layer_norm")));
    const bool bf16 = precision == Precision::kBf16;
    CAPTURE(lc.shape, lc.axis, lc.batch, lc.scale, lc.center, lc.seq_first, to_string(precision));
    json layers = json::array();
    if (lc.seq_first) layers.push_back({{"kind", "transpose"}, {"perm", {1, 0, 2}}});
    layers.push_back(
        {{"kind", "layer_norm"}, {"name", "ln"}, {"axis", lc.axis}, {"scale", lc.scale}, {"center", lc.center}});
    if (lc.seq_first) layers.push_back({{"kind", "transpose"}, {"perm", {1, 0, 2}}});
    const auto model = graph_model(layers, lc.shape);
    const auto rank = static_cast<int>(lc.shape.size()) + 1;
    const int axis = lc.axis < 0 ? rank + lc.axis : lc.axis;
    std::int64_t features = 1, total = lc.batch;
    for (int i = 1; i < rank; ++i) {
        total *= lc.shape[static_cast<std::size_t>(i - 1)];
        if (i >= axis) features *= lc.shape[static_cast<std::size_t>(i - 1)];
    }
    const TensorDef *scale = model.tensor("ln/scale"), *bias = model.tensor("ln/bias");
    REQUIRE((scale != nullptr) == lc.scale);
    REQUIRE((bias != nullptr) == lc.center);
    if (scale) CHECK(scale->shape == std::vector<std::int64_t>(lc.shape.begin() + axis - 1, lc.shape.end()));
    std::vector<float> params =
        bf16_exact(random_vector(static_cast<std::size_t>(model.parameter_count), 31, 0.5), precision);
    std::vector<float> grads(params.size());
    auto net = Network::create(model, NetworkOptions{lc.batch, precision, false, false, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    const auto x = bf16_exact(random_vector(static_cast<std::size_t>(total), 32, 2.0), precision);
    const auto dy = bf16_exact(random_vector(x.size(), 33), precision);
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    (*net)->forward(true);
    const auto ref = layer_norm_ref(x, dy, total / features, features, tensor_slice(params, scale),
                                    tensor_slice(params, bias), 1e-5);
    CHECK(rel_l2({(*net)->outputs().begin(), (*net)->outputs().end()}, ref.y) < (bf16 ? 1e-2 : 1e-5));
    (*net)->backward_from(dy);
    const double gtol = bf16 ? 2e-2 : 1e-4;
    CHECK(rel_l2({(*net)->input_gradient().begin(), (*net)->input_gradient().end()}, ref.dx) < gtol);
    if (scale) CHECK(rel_l2(tensor_slice(grads, scale), ref.dscale) < gtol);
    if (bias) CHECK(rel_l2(tensor_slice(grads, bias), ref.dbias) < gtol);
}

TEST_CASE("layer_norm gradients: central differences and bf16 against f32", "[nn_engine][norm][layer_norm]") {
    const std::vector<ModelDescription> models = {
        graph_model(json::array({{{"kind", "layer_norm"}}}), {4, 6}),
        graph_model(json::array({{{"kind", "layer_norm"}, {"axis", -2}, {"center", false}}}), {3, 5}),
        graph_model(json::array({{{"kind", "dense"}, {"units", 8}},
                                 {{"kind", "layer_norm"}, {"epsilon", 1e-3}},
                                 {{"kind", "gelu"}},
                                 {{"kind", "dense"}, {"units", 3}}}),
                    {6}),
    };
    for (std::size_t i = 0; i < models.size(); ++i) {
        CAPTURE(i);
        check_gradients(models[i], 3, 60 + i);
        check_bf16_against_f32(models[i], 3, 70 + i, 3e-2);
    }
}

TEST_CASE("layer_norm description errors name the field or the axis", "[nn_engine][norm][layer_norm]") {
    using Catch::Contains;
    CHECK_THAT(parse_error(json::array({{{"kind", "layer_norm"}, {"epsilon", -1}}}), {4, 6}),
               Contains("layer 0 (layer_norm): field \"epsilon\": expected a number in (0, 1], got -1"));
    CHECK_THAT(parse_error(json::array({{{"kind", "layer_norm"}, {"axis", 0}}}), {4, 6}),
               Contains("axis 0 of N x 4 x 6 normalises over the batch axis; give an axis after it (-1: the last)"));
    CHECK_THAT(parse_error(json::array({{{"kind", "layer_norm"}, {"axis", 3}}}), {4, 6}),
               Contains("axis 3 is outside the input N x 4 x 6 (rank 3)"));
    CHECK_THAT(parse_error(json::array({{{"kind", "layer_norm"}, {"axis", -4}}}), {4, 6}),
               Contains("axis -4 is outside the input"));
    CHECK_THAT(parse_error(json::array({{{"kind", "layer_norm"}, {"axis", "last"}}}), {4, 6}),
               Contains("field \"axis\""));
    CHECK_THAT(parse_error(json::array({{{"kind", "layer_norm"}}}), {4}, "int"),
               Contains("layer_norm): expects floats, got integer ids"));
    CHECK_THAT(parse_error(json::array({{{"kind", "layer_norm"}, {"scales", true}}}), {4}),
               Contains("unknown field \"scales\" (did you mean \"scale\"?"));
}

}  // namespace psrun::nn::test::ops_layer_norm_test
