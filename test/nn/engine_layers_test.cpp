// Every layer kind of the engine against naive reference loops (test/nn/reference_layers.h):
// forward, the data gradient and the parameter gradients, on odd shapes, stride 2, same and
// valid padding, one and several channels, batch 1 and 3.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>

#include "test/nn/engine_test_util.h"
#include "test/nn/reference_layers.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;
// The precisions to test: f32, and bf16 where the CPU runs it.
// Inputs exactly representable in the precision (bf16: rounded to nearest even), so that the
// reference sees the values the layer sees; and the tolerance on relative L2 errors.
double tolerance(Precision precision, double f32) { return precision == Precision::kBf16 ? 1e-2 : f32; }

std::vector<float> weights_of(const std::vector<float>& grads, std::size_t count) {
    return {grads.begin(), grads.begin() + static_cast<std::ptrdiff_t>(count)};
}
std::vector<float> bias_of(const std::vector<float>& grads, std::size_t count) {
    return {grads.begin() + static_cast<std::ptrdiff_t>(count), grads.end()};
}

struct ConvCase {
    int c, h, w, filters, kh, kw, stride;
    const char* padding;
    int batch;
    bool relu;
    bool bias = true;
};

// Seeded random shapes on top of the listed ones: 1-5 channels, 3-12 rows/columns, kernels up
// to 5 (at most the input with valid padding), stride 1-3, batch 1 or 3.
std::vector<ConvCase> random_conv_cases() {
    psrun::Rng rng(2024);
    std::vector<ConvCase> cases;
    for (int i = 0; i < 6; ++i) {
        ConvCase c{};
        c.c = 1 + static_cast<int>(rng.below(5));
        c.h = 3 + static_cast<int>(rng.below(10));
        c.w = 3 + static_cast<int>(rng.below(10));
        c.filters = 1 + static_cast<int>(rng.below(20));
        c.padding = rng.below(2) ? "same" : "valid";
        c.kh = 1 + static_cast<int>(rng.below(static_cast<std::uint64_t>(std::min(5, c.h))));
        c.kw = 1 + static_cast<int>(rng.below(static_cast<std::uint64_t>(std::min(5, c.w))));
        c.stride = 1 + static_cast<int>(rng.below(3));
        c.batch = rng.below(2) ? 3 : 1;
        c.relu = rng.below(2) == 1;
        c.bias = rng.below(4) != 0;
        cases.push_back(c);
    }
    return cases;
}

TEST_CASE("conv2d layer matches the reference loop", "[nn_engine][layers]") {
    const auto cs = GENERATE(
        from_range(random_conv_cases()), ConvCase{1, 7, 5, 3, 3, 3, 1, "same", 1, false},
        ConvCase{3, 9, 8, 5, 3, 2, 2, "same", 3, true}, ConvCase{2, 6, 7, 4, 3, 3, 2, "valid", 3, false},
        ConvCase{4, 5, 5, 16, 5, 5, 1, "same", 3, true}, ConvCase{3, 11, 10, 2, 4, 4, 2, "same", 1, false},
        ConvCase{1, 8, 8, 32, 5, 5, 1, "same", 3, true}, ConvCase{2, 7, 6, 3, 3, 3, 2, "same", 3, true, false});
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    const double tol = tolerance(precision, 1e-5);
    CAPTURE(to_string(precision), cs.c, cs.h, cs.w, cs.filters, cs.kh, cs.kw, cs.stride, cs.padding, cs.batch, cs.relu,
            cs.bias);
    json layers = json::array({{{"kind", "conv2d"},
                                {"filters", cs.filters},
                                {"kernel", {cs.kh, cs.kw}},
                                {"stride", cs.stride},
                                {"padding", cs.padding},
                                {"bias", cs.bias}}});
    if (cs.relu) layers.push_back({{"kind", "relu"}});
    const auto model = model_from(layers, cs.c, cs.h, cs.w);
    const auto& s = model.nodes[0];
    const ValueInfo& in = model.value(s.inputs[0]);
    LayerHarness h(model, 0, cs.relu ? 2 : 1, cs.batch, precision);
    REQUIRE(h.network().kernel_labels().front() == (cs.relu ? "conv2d+relu" : "conv2d"));
    h.set_params(bf16_exact(random_vector(h.params.size(), 1), precision));
    const auto x =
        bf16_exact(random_vector(static_cast<std::size_t>(cs.batch * *elements_per_example(in.dims)), 2), precision);
    const auto dy = bf16_exact(
        random_vector(static_cast<std::size_t>(cs.batch * *elements_per_example(s.output_info[0].dims)), 3), precision);
    const auto ref = conv_ref(s, in, cs.batch, x, h.params, dy, cs.relu);
    CHECK(rel_l2(h.forward(x), ref.y) < tol);
    CHECK(rel_l2(h.backward(dy), ref.dx) < tol);
    const auto wsize = static_cast<std::size_t>(model.tensors[0].size);
    CHECK(rel_l2(weights_of(h.grads, wsize), ref.dw) < tol);
    CHECK(rel_l2(bias_of(h.grads, wsize), ref.db) < tol);
}

struct PoolCase {
    const char* kind;
    int c, h, w, window, stride;
    const char* padding;
    int batch;
};

std::vector<PoolCase> random_pool_cases() {
    psrun::Rng rng(2025);
    std::vector<PoolCase> cases;
    for (int i = 0; i < 6; ++i) {
        PoolCase p{};
        p.kind = rng.below(2) ? "max_pool" : "avg_pool";
        p.c = 1 + static_cast<int>(rng.below(20));
        p.h = 3 + static_cast<int>(rng.below(10));
        p.w = 3 + static_cast<int>(rng.below(10));
        p.window = 1 + static_cast<int>(rng.below(3));
        p.stride = 1 + static_cast<int>(rng.below(3));
        p.padding = rng.below(2) ? "same" : "valid";
        p.batch = rng.below(2) ? 3 : 1;
        cases.push_back(p);
    }
    return cases;
}

TEST_CASE("pool layers match the reference loop", "[nn_engine][layers]") {
    const auto pc =
        GENERATE(from_range(random_pool_cases()), PoolCase{"max_pool", 1, 7, 5, 2, 2, "same", 1},
                 PoolCase{"max_pool", 3, 9, 8, 3, 2, "same", 3}, PoolCase{"max_pool", 17, 6, 7, 2, 2, "valid", 3},
                 PoolCase{"avg_pool", 1, 7, 5, 2, 2, "same", 3}, PoolCase{"avg_pool", 5, 9, 9, 3, 2, "same", 1},
                 PoolCase{"avg_pool", 16, 8, 6, 2, 1, "valid", 3});
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    const double tol = tolerance(precision, 1e-6);
    CAPTURE(to_string(precision), pc.kind, pc.c, pc.h, pc.w, pc.window, pc.stride, pc.padding, pc.batch);
    const auto model = model_from(
        json::array({{{"kind", pc.kind}, {"window", pc.window}, {"stride", pc.stride}, {"padding", pc.padding}}}), pc.c,
        pc.h, pc.w);
    const auto& s = model.nodes[0];
    const ValueInfo& in = model.value(s.inputs[0]);
    LayerHarness h(model, 0, 1, pc.batch, precision);
    const auto x =
        bf16_exact(random_vector(static_cast<std::size_t>(pc.batch * *elements_per_example(in.dims)), 4), precision);
    const auto dy = bf16_exact(
        random_vector(static_cast<std::size_t>(pc.batch * *elements_per_example(s.output_info[0].dims)), 5), precision);
    const auto [y, dx] = pool_ref(s, in, pc.batch, x, dy);
    CHECK(rel_l2(h.forward(x), y) < tol);
    CHECK(rel_l2(h.backward(dy), dx) < tol);
}

TEST_CASE("a dilated max pool matches the reference loop", "[nn_engine][layers]") {
    // MaxPool2d(3, stride, padding, dilation=2) over 9 x 8: taps two apart, oneDNN's pooling_v2.
    const auto stride = GENERATE(1, 2);
    const json padding = GENERATE(json("valid"), json({1, 2, 1, 0}));
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    const double tol = tolerance(precision, 1e-6);
    CAPTURE(stride, padding.dump(), to_string(precision));
    const auto model = model_from(
        json::array(
            {{{"kind", "max_pool"}, {"window", 3}, {"stride", stride}, {"padding", padding}, {"dilation", {2, 2}}}}),
        3, 9, 8);
    const auto& s = model.nodes[0];
    const ValueInfo& in = model.value(s.inputs[0]);
    CHECK(s.output_info[0].dims[2].value == (padding.is_string() ? (9 - 5) / stride + 1 : (9 + 2 - 5) / stride + 1));
    LayerHarness h(model, 0, 1, 2, precision);
    const auto x =
        bf16_exact(random_vector(static_cast<std::size_t>(2 * *elements_per_example(in.dims)), 4), precision);
    const auto dy = bf16_exact(
        random_vector(static_cast<std::size_t>(2 * *elements_per_example(s.output_info[0].dims)), 5), precision);
    const auto [y, dx] = pool_ref(s, in, 2, x, dy);
    CHECK(rel_l2(h.forward(x), y) < tol);
    CHECK(rel_l2(h.backward(dy), dx) < tol);
}

TEST_CASE("pooling an RGB image input runs oneDNN's JIT pooling, not its reference loop", "[nn_engine][layers]") {
    // Plain NCHW with 3 channels has no JIT pooling in oneDNN 2.6; the kernel pools channels-last.
    const auto kind = GENERATE("max_pool", "avg_pool");
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    CAPTURE(kind, to_string(precision));
    const auto model = model_from(json::array({{{"kind", kind}, {"window", 2}}}), 3, 16, 16);
    LayerHarness h(model, 0, 1, 2, precision);
    const auto impls = h.network().implementations();
    REQUIRE_FALSE(impls.empty());
    for (const auto& line : impls) {
        CAPTURE(line);
        CHECK(line.find("simple") == std::string::npos);
        CHECK(line.find("ref:") == std::string::npos);
    }
    const auto& s = model.nodes[0];
    const ValueInfo& in = model.value(s.inputs[0]);
    const auto x =
        bf16_exact(random_vector(static_cast<std::size_t>(2 * *elements_per_example(in.dims)), 6), precision);
    const auto dy = bf16_exact(
        random_vector(static_cast<std::size_t>(2 * *elements_per_example(s.output_info[0].dims)), 7), precision);
    const auto [y, dx] = pool_ref(s, in, 2, x, dy);
    CHECK(rel_l2(h.forward(x), y) < tolerance(precision, 1e-6));
    CHECK(rel_l2(h.backward(dy), dx) < tolerance(precision, 1e-6));
}

struct DenseCase {
    int c, h, w, units, batch;
    bool relu;
    bool bias = true;
};

TEST_CASE("dense layer matches the reference loop, NHWC flattening included", "[nn_engine][layers]") {
    const auto dc =
        GENERATE(DenseCase{3, 5, 7, 4, 3, false}, DenseCase{1, 6, 5, 9, 1, true}, DenseCase{16, 3, 3, 10, 3, true},
                 DenseCase{7, 1, 1, 5, 3, false}, DenseCase{2, 3, 5, 6, 3, true, false});
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    const double tol = tolerance(precision, 1e-5);
    CAPTURE(to_string(precision), dc.c, dc.h, dc.w, dc.units, dc.batch, dc.relu, dc.bias);
    json layers = json::array({{{"kind", "dense"}, {"units", dc.units}, {"bias", dc.bias}}});
    if (dc.relu) layers.push_back({{"kind", "relu"}});
    const auto model = model_from(layers, dc.c, dc.h, dc.w);
    const auto& s = model.nodes[0];
    const ValueInfo& in = model.value(s.inputs[0]);
    LayerHarness h(model, 0, dc.relu ? 2 : 1, dc.batch, precision);
    h.set_params(bf16_exact(random_vector(h.params.size(), 6), precision));
    const auto x =
        bf16_exact(random_vector(static_cast<std::size_t>(dc.batch * *elements_per_example(in.dims)), 7), precision);
    const auto dy = bf16_exact(random_vector(static_cast<std::size_t>(dc.batch * dc.units), 8), precision);
    const auto ref = dense_ref(s, in, dc.batch, x, h.params, dy, dc.relu);
    CHECK(rel_l2(h.forward(x), ref.y) < tol);
    CHECK(rel_l2(h.backward(dy), ref.dx) < tol);
    const auto wsize = static_cast<std::size_t>(model.tensors[0].size);
    CHECK(rel_l2(weights_of(h.grads, wsize), ref.dw) < tol);
    CHECK(rel_l2(bias_of(h.grads, wsize), ref.db) < tol);
}

TEST_CASE("dense layer after a conv: a flat input and an image input", "[nn_engine][layers]") {
    // A dense layer fed by a dense layer sees flat {N, C} input.
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    const double tol = tolerance(precision, 1e-5);
    const auto model =
        model_from(json::array({{{"kind", "dense"}, {"units", 6}}, {{"kind", "dense"}, {"units", 4}}}), 2, 3, 3);
    const auto& s = model.nodes[1];
    const ValueInfo& in = model.value(s.inputs[0]);
    REQUIRE(in.rank() == 2);
    LayerHarness h(model, 1, 1, 3, precision);
    h.set_params(bf16_exact(random_vector(h.params.size(), 9), precision));
    const auto x = bf16_exact(random_vector(18, 10), precision), dy = bf16_exact(random_vector(12, 11), precision);
    const auto ref = dense_ref(s, in, 3, x, h.params, dy, false);
    CHECK(rel_l2(h.forward(x), ref.y) < tol);
    CHECK(rel_l2(h.backward(dy), ref.dx) < tol);
}

TEST_CASE("activation layers match the reference", "[nn_engine][layers]") {
    const auto kind = GENERATE(as<std::string>{}, "relu", "tanh", "sigmoid");
    const auto shape = GENERATE(std::array<int, 4>{1, 7, 5, 1}, std::array<int, 4>{17, 3, 4, 3});
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    const double tol = tolerance(precision, 1e-5);
    CAPTURE(to_string(precision), kind, shape);
    const auto model = model_from(json::array({{{"kind", kind}}}), shape[0], shape[1], shape[2]);
    LayerHarness h(model, 0, 1, shape[3], precision);
    const auto n = static_cast<std::size_t>(shape[0] * shape[1] * shape[2] * shape[3]);
    const auto x = bf16_exact(random_vector(n, 12, 3.0), precision), dy = bf16_exact(random_vector(n, 13), precision);
    V y(n), dx(n);
    for (std::size_t i = 0; i < n; ++i) {
        const double v = x[i];
        if (kind == "relu") {
            y[i] = std::max(v, 0.0);
            dx[i] = v > 0 ? dy[i] : 0.0;
        } else if (kind == "tanh") {
            y[i] = std::tanh(v);
            dx[i] = dy[i] * (1 - y[i] * y[i]);
        } else {
            y[i] = 1 / (1 + std::exp(-v));
            dx[i] = dy[i] * y[i] * (1 - y[i]);
        }
    }
    CHECK(rel_l2(h.forward(x), y) < tol);
    CHECK(rel_l2(h.backward(dy), dx) < tol);
}

TEST_CASE("dropout: identity at inference and keep 1, inverted mask from the seed in training", "[nn_engine][layers]") {
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    const double tol = tolerance(precision, 1e-6);
    CAPTURE(to_string(precision));
    const auto model = model_from(json::array({{{"kind", "dropout"}, {"keep_prob", 0.6}}}), 5, 9, 7);
    LayerHarness h(model, 0, 1, 3, precision);
    const std::size_t n = 3 * 5 * 9 * 7;
    const auto x = bf16_exact(random_vector(n, 14, 2.0), precision), dy = bf16_exact(random_vector(n, 15), precision);
    CHECK(rel_l2(h.forward(x, false), x) == 0.0);
    CHECK(rel_l2(h.backward(dy), dy) == 0.0);

    const auto y = h.forward(x, true, 42);
    const auto dx = h.backward(dy);
    std::size_t kept = 0;
    for (std::size_t i = 0; i < n; ++i) {
        const bool keep = y[i] != 0.0f;
        kept += keep ? 1 : 0;
        INFO(i);
        REQUIRE(y[i] == Approx(keep ? x[i] / 0.6 : 0.0).epsilon(tol));
        REQUIRE(dx[i] == Approx(keep ? dy[i] / 0.6 : 0.0).epsilon(tol).margin(1e-12));
    }
    const double fraction = static_cast<double>(kept) / static_cast<double>(n);
    CHECK(fraction == Approx(0.6).margin(0.05));
    // The same seed gives the same mask; another seed another one.
    CHECK(h.forward(x, true, 42) == y);
    CHECK(h.forward(x, true, 43) != y);

    const auto keep_all = model_from(json::array({{{"kind", "dropout"}, {"keep_prob", 1.0}}}), 2, 3, 3);
    LayerHarness one(keep_all, 0, 1, 1);
    const auto x1 = random_vector(18, 16);
    CHECK(one.forward(x1, true) == x1);
}

TEST_CASE("stop_gradient: the input unchanged, no gradient through it (x.detach())", "[nn_engine][layers]") {
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    CAPTURE(to_string(precision));
    const auto model = model_from(json::array({{{"kind", "stop_gradient"}}}), 2, 3, 3);
    LayerHarness h(model, 0, 1, 2, precision);
    const auto x = bf16_exact(random_vector(36, 31), precision);
    CHECK(h.forward(x) == x);
    const auto dx = h.backward(random_vector(36, 32));
    CHECK(std::all_of(dx.begin(), dx.end(), [](float v) { return v == 0.0f; }));
}

TEST_CASE("random: noise of the input's dims from the step's seed, in every forward; zero gradient",
          "[nn_engine][layers]") {
    const auto precision = GENERATE(from_range(test_precisions("layers")));
    CAPTURE(to_string(precision));
    const std::size_t n = 4 * 8 * 16 * 16;
    const auto x = random_vector(n, 21), other = random_vector(n, 22, 5.0), dy = random_vector(n, 23);
    auto moments = [](const std::vector<float>& v) {
        double s = 0, s2 = 0;
        for (const float e : v) s += e;
        const double mean = s / static_cast<double>(v.size());
        for (const float e : v) s2 += (e - mean) * (e - mean);
        return std::pair{mean, std::sqrt(s2 / static_cast<double>(v.size()))};
    };
    SECTION("normal: mean 0.5, scale 2") {
        const auto model = model_from(
            json::array({{{"kind", "random"}, {"distribution", "normal"}, {"mean", 0.5}, {"scale", 2.0}}}), 8, 16, 16);
        LayerHarness h(model, 0, 1, 4, precision);
        const auto y = h.forward(x, true, 7);
        const auto [mean, sd] = moments(y);
        CHECK(mean == Approx(0.5).margin(0.1));  // the mean's own spread: 2 / sqrt(8192) = 0.022
        CHECK(sd == Approx(2.0).margin(0.1));
        std::size_t within = 0;
        for (const float e : y) within += std::abs(e - 0.5f) < 2.0f ? 1 : 0;
        CHECK(static_cast<double>(within) / static_cast<double>(n) == Approx(0.6827).margin(0.03));
        CHECK(h.forward(other, true, 7) == y);  // the input's values are not read
        CHECK(h.forward(x, false, 7) == y);     // drawn in evaluation too (torch.randn_like)
        CHECK(h.forward(x, true, 8) != y);
        const auto dx = h.backward(dy);
        CHECK(std::all_of(dx.begin(), dx.end(), [](float v) { return v == 0.0f; }));
    }
    SECTION("uniform in [-1, 3)") {
        const auto model = model_from(
            json::array({{{"kind", "random"}, {"distribution", "uniform"}, {"low", -1.0}, {"high", 3.0}}}), 8, 16, 16);
        LayerHarness h(model, 0, 1, 4, precision);
        const auto y = h.forward(x, true, 7);
        CHECK(std::all_of(y.begin(), y.end(), [](float v) { return v >= -1.0f && v <= 3.0f; }));
        const auto [mean, sd] = moments(y);
        CHECK(mean == Approx(1.0).margin(0.05));
        CHECK(sd == Approx(4.0 / std::sqrt(12.0)).margin(0.05));
        CHECK(h.forward(x, true, 9) != y);
    }
    SECTION("bad fields are refused, naming them") {
        auto refused = [](json layer) {
            const json doc{{"input", {{"channels", 1}, {"height", 2}, {"width", 2}}},
                           {"classes", 3},
                           {"layers", {layer, {{"kind", "dense"}, {"units", 3}}}},
                           {"loss", {{"kind", "softmax_cross_entropy"}}}};
            auto model = parse_model(doc, "test");
            return model ? std::string() : model.error().message;
        };
        CHECK_THAT(refused({{"kind", "random"}, {"distribution", "normal"}, {"scale", -1.0}}),
                   Catch::Contains("\"scale\": expected a number >= 0"));
        CHECK_THAT(refused({{"kind", "random"}, {"distribution", "uniform"}, {"low", 2.0}, {"high", 1.0}}),
                   Catch::Contains("\"high\": expected a number >= low"));
        CHECK_THAT(refused({{"kind", "random"}, {"distribution", "normal"}, {"low", 0.0}}), Catch::Contains("low"));
        CHECK_THAT(refused({{"kind", "random"}}), Catch::Contains("distribution"));
    }
}

}  // namespace
}  // namespace psrun::nn::test
