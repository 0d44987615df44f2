// conv_transpose and resize (workerd/nn/ops/conv_transpose.cpp, resize.cpp): forward against
// naive loops (1-D and 2-D; stride, padding, output_padding, dilation, groups, bias; nearest and
// linear up- and down-sampling), gradients against central differences, bf16 against f32, and
// the errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

struct TransposeCase {
    bool two_d;
    int groups, stride, pad, output_padding, dilation;
    bool bias;
};

// The scatter form: x[n, i, iy, ix] adds x * w[i, o % (O/g), ky, kx] to
// y[n, o, iy * s - pad + ky * d, ...] for o in i's group. 1-D: H = KH = 1, no pad on H.
std::vector<double> conv_transpose_ref(const std::vector<float>& x, const std::vector<float>& w,
                                       const std::vector<float>& b, std::int64_t n, std::int64_t c, std::int64_t h,
                                       std::int64_t wd, std::int64_t o, std::int64_t k, const TransposeCase& tc,
                                       std::int64_t oh, std::int64_t ow) {
    const std::int64_t kh = tc.two_d ? k : 1, ph = tc.two_d ? tc.pad : 0, sh = tc.two_d ? tc.stride : 1;
    const std::int64_t dh = tc.two_d ? tc.dilation : 1;
    const std::int64_t ci = c / tc.groups, co = o / tc.groups;
    std::vector<double> y(static_cast<std::size_t>(n * o * oh * ow));
    for (std::int64_t e = 0; e < n; ++e)
        for (std::int64_t f = 0; f < o; ++f)
            for (std::int64_t p = 0; p < oh * ow; ++p)
                y[static_cast<std::size_t>((e * o + f) * oh * ow + p)] = tc.bias ? b[static_cast<std::size_t>(f)] : 0.0;
    for (std::int64_t e = 0; e < n; ++e)
        for (std::int64_t i = 0; i < c; ++i)
            for (std::int64_t iy = 0; iy < h; ++iy)
                for (std::int64_t ix = 0; ix < wd; ++ix) {
                    const double v = x[static_cast<std::size_t>(((e * c + i) * h + iy) * wd + ix)];
                    for (std::int64_t j = 0; j < co; ++j)
                        for (std::int64_t ky = 0; ky < kh; ++ky)
                            for (std::int64_t kx = 0; kx < k; ++kx) {
                                const std::int64_t y_at = iy * sh - ph + ky * dh,
                                                   x_at = ix * tc.stride - tc.pad + kx * tc.dilation;
                                if (y_at < 0 || y_at >= oh || x_at < 0 || x_at >= ow) continue;
                                const std::int64_t f = (i / ci) * co + j;
                                y[static_cast<std::size_t>(((e * o + f) * oh + y_at) * ow + x_at)] +=
                                    v * w[static_cast<std::size_t>(((i * co + j) * kh + ky) * k + kx)];
                            }
                }
    return y;
}

// oneDNN's resampling along one axis: the source positions and weights of output o.
struct Taps {
    std::int64_t left, right;
    double weight;  // of right
};
Taps taps(bool linear, std::int64_t o, std::int64_t in, std::int64_t out) {
    const double s = (static_cast<double>(o) + 0.5) * static_cast<double>(in) / static_cast<double>(out) - 0.5;
    if (!linear) {
        const auto i = std::clamp(static_cast<std::int64_t>(std::floor(s + 0.5)), std::int64_t{0}, in - 1);
        return {i, i, 0.0};
    }
    const double c = std::clamp(s, 0.0, static_cast<double>(in - 1));
    const auto l = static_cast<std::int64_t>(std::floor(c));
    return {l, std::min(l + 1, in - 1), c - static_cast<double>(l)};
}

}  // namespace

TEST_CASE("conv_transpose matches the reference loop", "[nn_ops_conv][conv_transpose]") {
    const auto tc = GENERATE(values<TransposeCase>({{false, 1, 2, 0, 0, 1, true},
                                                    {false, 2, 2, 1, 1, 1, true},
                                                    {false, 1, 3, 2, 2, 2, false},
                                                    {true, 1, 2, 1, 1, 1, true},
                                                    {true, 2, 2, 0, 0, 1, false},
                                                    {true, 1, 1, 1, 0, 2, true}}));
    const int batch = GENERATE(1, 2);
    CAPTURE(tc.two_d, tc.groups, tc.stride, tc.pad, tc.output_padding, tc.dilation, tc.bias, batch);
    const std::int64_t c = 4, o = 6, k = 3, h = tc.two_d ? 5 : 1, w = tc.two_d ? 4 : 7;
    const auto size = [&](std::int64_t in) {
        return (in - 1) * tc.stride - 2 * tc.pad + tc.dilation * (k - 1) + tc.output_padding + 1;
    };
    const std::int64_t oh = tc.two_d ? size(h) : 1, ow = size(w);
    json layer = {{"kind", "conv_transpose"},
                  {"name", "t"},
                  {"filters", o},
                  {"stride", tc.stride},
                  {"output_padding", tc.output_padding},
                  {"dilation", tc.dilation},
                  {"groups", tc.groups},
                  {"bias", tc.bias}};
    if (tc.bias) layer["bias_init"] = {{"kind", "uniform"}, {"limit", 0.5}};
    layer["kernel"] = tc.two_d ? json(k) : json::array({k});
    layer["padding"] = tc.two_d ? json(tc.pad) : json::array({tc.pad, tc.pad});
    const auto model =
        graph_model({layer}, tc.two_d ? std::vector<std::int64_t>{c, h, w} : std::vector<std::int64_t>{c, w});
    const std::vector<std::int64_t> want =
        tc.two_d ? std::vector<std::int64_t>{batch, o, oh, ow} : std::vector<std::int64_t>{batch, o, ow};
    CHECK(concrete(model.value("t").dims, batch) == want);
    const std::vector<std::int64_t> wshape =
        tc.two_d ? std::vector<std::int64_t>{c, o / tc.groups, k, k} : std::vector<std::int64_t>{c, o / tc.groups, k};
    CHECK(model.tensor("t/w")->shape == wshape);
    const auto r = forward_of(model, batch, 31);
    const auto b = tc.bias ? tensor_values(model, r.params, "t/b") : std::vector<float>{};
    check_close(r.output,
                conv_transpose_ref(r.input, tensor_values(model, r.params, "t/w"), b, batch, c, h, w, o, k, tc, oh, ow),
                1e-4);
    check_gradients(model, batch, 33);
    check_bf16_against_f32(model, batch, 35);
}

TEST_CASE("resize: nearest and linear, up and down, 1-D and 2-D", "[nn_ops_conv][resize]") {
    struct ResizeCase {
        const char* mode;
        std::vector<std::int64_t> in, out;  // spatial
        json size;                          // the layer's scales or sizes
    };
    const auto rc = GENERATE(values<ResizeCase>({{"nearest", {5, 4}, {10, 8}, {{"scales", 2}}},
                                                 {"nearest", {6}, {18}, {{"scales", {3.0}}}},
                                                 {"nearest", {6, 7}, {3, 5}, {{"sizes", {3, 5}}}},
                                                 {"linear", {5, 4}, {10, 8}, {{"scales", {2.0, 2.0}}}},
                                                 {"linear", {8, 6}, {4, 3}, {{"scales", 0.5}}},
                                                 {"linear", {5}, {7}, {{"sizes", {7}}}},
                                                 {"linear", {4, 6}, {6, 9}, {{"scales", 1.5}}}}));
    CAPTURE(rc.mode, rc.in, rc.out, rc.size.dump());
    const bool linear = std::string(rc.mode) == "linear";
    const std::int64_t c = 3, batch = 2;
    json layer = {{"kind", "resize"}, {"name", "r"}, {"mode", rc.mode}};
    layer.update(rc.size);
    std::vector<std::int64_t> shape{c};
    shape.insert(shape.end(), rc.in.begin(), rc.in.end());
    // tanh after, so that the gradient is not constant.
    const auto model = graph_model({layer, {{"kind", "tanh"}, {"name", "out"}}}, shape);
    std::vector<std::int64_t> want{batch, c};
    want.insert(want.end(), rc.out.begin(), rc.out.end());
    CHECK(concrete(model.value("r").dims, batch) == want);
    const auto r = forward_of(model, batch, 41);
    const bool two = rc.in.size() == 2;
    const std::int64_t ih = two ? rc.in[0] : 1, iw = rc.in.back(), oh = two ? rc.out[0] : 1, ow = rc.out.back();
    std::vector<double> expected;
    for (std::int64_t row = 0; row < batch * c; ++row)
        for (std::int64_t y = 0; y < oh; ++y)
            for (std::int64_t x = 0; x < ow; ++x) {
                const Taps ty = taps(linear, y, ih, oh), tx = taps(linear, x, iw, ow);
                auto at = [&](std::int64_t yy, std::int64_t xx) {
                    return static_cast<double>(r.input[static_cast<std::size_t>((row * ih + yy) * iw + xx)]);
                };
                const double top = at(ty.left, tx.left) * (1 - tx.weight) + at(ty.left, tx.right) * tx.weight;
                const double bottom = at(ty.right, tx.left) * (1 - tx.weight) + at(ty.right, tx.right) * tx.weight;
                expected.push_back(std::tanh(top * (1 - ty.weight) + bottom * ty.weight));
            }
    check_close(r.output, expected, 1e-5);
    check_gradients(model, batch, 43);
    check_bf16_against_f32(model, batch, 45);
}

TEST_CASE("conv_transpose and resize: options and shapes that do not fit are refused",
          "[nn_ops_conv][conv_transpose][resize]") {
    const json t = {{"kind", "conv_transpose"}, {"filters", 2}, {"kernel", 3}, {"stride", 2}};
    auto with = [](json layer, const char* key, json value) {
        layer[key] = std::move(value);
        return json::array({layer});
    };
    CHECK_THAT(graph_error(with(t, "output_padding", 2), {2, 5, 5}),
               Catch::Contains("output_padding 2 must be smaller than the stride 2"));
    CHECK_THAT(graph_error(with(t, "padding", 3), {2, 5, 5}), Catch::Contains("a pad must be at most 2"));
    CHECK_THAT(graph_error(with(t, "groups", 3), {2, 5, 5}), Catch::Contains("groups 3 must divide"));
    CHECK_THAT(graph_error(json::array({t}), {2, 5}), Catch::Contains("a 2-D kernel expects an N x C x H x W input"));
    CHECK_THAT(graph_error(with(t, "kernel", {3}), {2, 5, 5}),
               Catch::Contains("a 1-D kernel expects an N x C x L input"));
    const json r = {{"kind", "resize"}, {"scales", 2}};
    CHECK_THAT(graph_error(json::array({r}), {6}), Catch::Contains("expects an N x C x L or N x C x H x W input"));
    CHECK_THAT(graph_error(with(r, "sizes", {4, 4}), {2, 5, 5}), Catch::Contains("give scales or sizes, not both"));
    CHECK_THAT(graph_error({{{"kind", "resize"}, {"sizes", {4}}}}, {2, 5, 5}), Catch::Contains("1 sizes for"));
    CHECK_THAT(graph_error({{{"kind", "resize"}, {"scales", 0.1}}}, {2, 5}), Catch::Contains("would be empty"));
    CHECK_THAT(graph_error({{{"kind", "resize"}, {"mode", "cubic"}, {"scales", 2}}}, {2, 5}), Catch::Contains("mode"));
}

}  // namespace psrun::nn::test
