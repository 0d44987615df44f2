// group_norm (workerd/nn/ops/group_norm*.cpp) against a reference built on layer_norm's loop
// (each example's group is one row): forward and gradients over ranks 3 to 5, groups 1, some
// and C (instance norm), with and without scale and bias, per channel and per group, batch 1
// and 3, f32 and bf16; central differences and bf16 against f32 in small networks; the
// description's errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "test/nn/engine_test_util.h"
#include "test/nn/reference_norm.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

// group_norm over x [n, c, s] from layer_norm_ref on rows [n * g, c / g * s]: y = a[c] xhat +
// b[c]; dx is layer norm's backward of dy * a[c]. scale/bias: [c], [g] (per group) or empty.
NormRef group_norm_ref(const std::vector<float>& x, const std::vector<float>& dy, std::int64_t n, std::int64_t c,
                       std::int64_t s, std::int64_t g, const std::vector<float>& scale, const std::vector<float>& bias,
                       double eps) {
    const std::int64_t m = c / g * s;
    const auto affine = [&](const std::vector<float>& t, std::int64_t ch, double fallback) {
        if (t.empty()) return fallback;
        return static_cast<double>(
            t[static_cast<std::size_t>(static_cast<std::int64_t>(t.size()) == c ? ch : ch / (c / g))]);
    };
    const NormRef plain = layer_norm_ref(x, {}, n * g, m, {}, {}, eps);  // y = xhat
    std::vector<float> dxhat(x.size());
    NormRef r;
    r.y.resize(x.size());
    r.dscale.assign(scale.empty() ? 0 : scale.size(), 0.0);
    r.dbias.assign(bias.empty() ? 0 : bias.size(), 0.0);
    for (std::int64_t e = 0; e < n; ++e)
        for (std::int64_t ch = 0; ch < c; ++ch)
            for (std::int64_t i = 0; i < s; ++i) {
                const auto at = static_cast<std::size_t>((e * c + ch) * s + i);
                const double xhat = plain.y[at];
                r.y[at] = affine(scale, ch, 1.0) * xhat + affine(bias, ch, 0.0);
                dxhat[at] = static_cast<float>(dy[at] * affine(scale, ch, 1.0));
                const auto k =
                    static_cast<std::size_t>(static_cast<std::int64_t>(scale.size()) == c ? ch : ch / (c / g));
                const auto kb =
                    static_cast<std::size_t>(static_cast<std::int64_t>(bias.size()) == c ? ch : ch / (c / g));
                if (!scale.empty()) r.dscale[k] += dy[at] * xhat;
                if (!bias.empty()) r.dbias[kb] += dy[at];
            }
    r.dx = layer_norm_ref(x, dxhat, n * g, m, {}, {}, eps).dx;
    return r;
}

struct GnCase {
    std::vector<std::int64_t> shape;  // after N: C, spatial...
    std::int64_t groups, batch;
    bool scale, center, per_group;
};

std::string parse_error(const json& layers, const std::vector<std::int64_t>& shape) {
    const json doc{{"input", {{"shape", shape}}}, {"layers", layers}, {"loss", {{"kind", "mean_squared_error"}}}};
    auto m = parse_model(doc, "F");
    REQUIRE_FALSE(m);
    CHECK(m.error().code == ErrorCode::kInvalidArgument);
    return m.error().message;
}

}  // namespace

TEST_CASE("group_norm matches the reference loop, forward and gradients", "[nn_ops_norm][group_norm]") {
    const auto gc = GENERATE(values<GnCase>({{{8, 5}, 4, 3, true, true, false},
                                             {{8, 5}, 1, 1, true, true, false},
                                             {{6, 4, 3}, 3, 3, true, true, false},
                                             {{6, 4, 3}, 6, 3, true, true, false},
                                             {{6, 4, 3}, 2, 2, false, true, false},
                                             {{6, 4, 3}, 2, 3, true, false, false},
                                             {{6, 4, 3}, 2, 3, false, false, false},
                                             {{6, 4, 3}, 3, 3, true, true, true},
                                             {{4, 2, 3, 2}, 2, 3, true, true, false},
                                             {{16, 7, 7}, 4, 2, true, true, false}}));
    const auto precision = GENERATE(from_range(test_precisions("group_norm")));
    const bool bf16 = precision == Precision::kBf16;
    CAPTURE(gc.shape, gc.groups, gc.batch, gc.scale, gc.center, gc.per_group, to_string(precision));
    const json layers = json::array({{{"kind", "group_norm"},
                                      {"name", "gn"},
                                      {"groups", gc.groups},
                                      {"scale", gc.scale},
                                      {"center", gc.center},
                                      {"affine", gc.per_group ? "group" : "channel"}}});
    const auto model = graph_model(layers, gc.shape);
    const std::int64_t c = gc.shape[0];
    std::int64_t s = 1;
    for (std::size_t i = 1; i < gc.shape.size(); ++i) s *= gc.shape[i];
    const TensorDef *scale = model.tensor("gn/scale"), *bias = model.tensor("gn/bias");
    REQUIRE((scale != nullptr) == gc.scale);
    REQUIRE((bias != nullptr) == gc.center);
    if (scale) CHECK(scale->shape == std::vector<std::int64_t>{gc.per_group ? gc.groups : c});
    std::vector<float> params =
        bf16_exact(random_vector(static_cast<std::size_t>(model.parameter_count), 41, 0.8), precision);
    std::vector<float> grads(params.size());
    auto net = Network::create(model, NetworkOptions{gc.batch, precision, false, false, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    const auto total = static_cast<std::size_t>(gc.batch * c * s);
    // An offset and a spread per channel, so that a wrong grouping shows.
    auto x = random_vector(total, 42, 2.0);
    for (std::size_t i = 0; i < total; ++i) x[i] += static_cast<float>((i / static_cast<std::size_t>(s)) % 5) * 0.7f;
    x = bf16_exact(x, precision);
    const auto dy = bf16_exact(random_vector(total, 43), precision);
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    (*net)->forward(true);
    const auto ref =
        group_norm_ref(x, dy, gc.batch, c, s, gc.groups, tensor_slice(params, scale), tensor_slice(params, bias), 1e-5);
    CHECK(rel_l2({(*net)->outputs().begin(), (*net)->outputs().end()}, ref.y) < (bf16 ? 1e-2 : 1e-5));
    (*net)->backward_from(dy);
    const double gtol = bf16 ? 2e-2 : 1e-4;
    CHECK(rel_l2({(*net)->input_gradient().begin(), (*net)->input_gradient().end()}, ref.dx) < gtol);
    if (scale) CHECK(rel_l2(tensor_slice(grads, scale), ref.dscale) < gtol);
    if (bias) CHECK(rel_l2(tensor_slice(grads, bias), ref.dbias) < gtol);
}

TEST_CASE("group_norm gradients: central differences and bf16 against f32", "[nn_ops_norm][group_norm]") {
    const std::vector<ModelDescription> models = {
        graph_model(json::array({{{"kind", "group_norm"}, {"groups", 2}}}), {4, 3, 3}),
        graph_model(json::array({{{"kind", "group_norm"}, {"groups", 4}, {"center", false}}}), {4, 6}),
        graph_model(json::array({{{"kind", "group_norm"}, {"groups", 2}, {"affine", "group"}}}), {4, 2, 2, 2}),
        graph_model(json::array({{{"kind", "conv2d"}, {"filters", 8}, {"kernel", 3}, {"padding", "same"}},
                                 {{"kind", "group_norm"}, {"groups", 4}, {"epsilon", 1e-3}},
                                 {{"kind", "tanh"}},
                                 {{"kind", "dense"}, {"units", 3}}}),
                    {2, 5, 5}),
        graph_model(json::array({{{"kind", "conv2d"}, {"filters", 8}, {"kernel", 3}, {"padding", "same"}},
                                 {{"kind", "group_norm"}, {"groups", 4}},
                                 {{"kind", "dense"}, {"units", 3}}}),
                    {2, 5, 5}),
    };
    for (std::size_t i = 0; i < models.size(); ++i) {
        CAPTURE(i);
        check_gradients(models[i], 3, 80 + i);
        check_bf16_against_f32(models[i], 3, 90 + i, 3e-2);
    }
}

TEST_CASE("group_norm description errors name the field or the channels", "[nn_ops_norm][group_norm]") {
    using Catch::Contains;
    CHECK_THAT(parse_error(json::array({{{"kind", "group_norm"}}}), {4, 6}), Contains("\"groups\""));
    CHECK_THAT(parse_error(json::array({{{"kind", "group_norm"}, {"groups", 3}}}), {4, 6}),
               Contains("groups 3 does not divide the 4 channels of N x 4 x 6"));
    CHECK_THAT(parse_error(json::array({{{"kind", "group_norm"}, {"groups", 8}}}), {4, 6}),
               Contains("groups 8 does not divide the 4 channels"));
    CHECK_THAT(parse_error(json::array({{{"kind", "group_norm"}, {"groups", 2}}}), {4}),
               Contains("expects an N x C x (D x H x) W input of rank 3 to 5, got N x 4"));
    CHECK_THAT(parse_error(json::array({{{"kind", "group_norm"}, {"groups", 2}, {"epsilon", 0}}}), {4, 6}),
               Contains("field \"epsilon\": expected a number in (0, 1], got 0"));
    CHECK_THAT(parse_error(json::array({{{"kind", "group_norm"}, {"groups", 2}, {"affine", "layer"}}}), {4, 6}),
               Contains("field \"affine\""));
    CHECK_THAT(parse_error(json::array({{{"kind", "group_norm"}, {"group", 2}}}), {4, 6}), Contains("\"groups\""));
}

}  // namespace psrun::nn::test

namespace psrun::nn::test {

// Not run by default: a timing line, group_norm against batch_norm and layer_norm on the same
// [N, C, H, W] (forward + backward, median and fastest of 22 steps).
TEST_CASE("group_norm step time against batch_norm and layer_norm", "[.][bench][group_norm]") {
    const std::vector<std::int64_t> shape{64, 28, 28};
    const std::int64_t batch = 32;
    const std::vector<std::pair<std::string, json>> layers = {
        {"group_norm G=8", {{"kind", "group_norm"}, {"groups", 8}}},
        {"group_norm G=C", {{"kind", "group_norm"}, {"groups", 64}}},
        {"batch_norm", {{"kind", "batch_norm"}}},
        {"layer_norm (C,H,W)", {{"kind", "layer_norm"}, {"axis", 1}}},
    };
    for (const auto& [label, layer] : layers) {
        const auto model = graph_model(json::array({layer}), shape);
        std::vector<float> params(static_cast<std::size_t>(model.parameter_count), 1.0f), grads(params.size());
        auto net = Network::create(model, NetworkOptions{batch, Precision::kF32, false, false, true}, params, grads);
        REQUIRE(net);
        const auto x = random_vector((*net)->input().size(), 7);
        std::copy(x.begin(), x.end(), (*net)->input().begin());
        const std::vector<float> dy(static_cast<std::size_t>((*net)->outputs().size()), 0.01f);
        std::vector<double> ms;
        for (int step = 0; step < 22; ++step) {
            const auto t0 = std::chrono::steady_clock::now();
            (*net)->forward(true);
            (*net)->backward_from(dy);
            ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
        }
        std::sort(ms.begin(), ms.end());
        WARN(label << ": " << ms[ms.size() / 2] << " ms forward + backward (fastest " << ms.front() << "), " << batch
                   << " x 64 x 28 x 28 f32");
    }
}

}  // namespace psrun::nn::test
