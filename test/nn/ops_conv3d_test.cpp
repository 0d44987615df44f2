// 3-D windows (workerd/nn/ops/window.cpp, conv.cpp, pool.cpp with "kernel"/"window" [kd, kh, kw]:
// PyTorch's Conv3d, MaxPool3d, AvgPool3d over N x C x D x H x W): the window's planning per
// axis (pads in ONNX's order, "same", ceil_mode), the conv forward against a naive loop
// (stride, padding, dilation, groups, bias), gradients against central differences, the pools
// and batch_norm over 5-D inputs, the conv + batch_norm fold, and the errors; conv_transpose with
// a 3-D kernel (PyTorch's ConvTranspose3d) against a scatter loop (stride, uneven pads,
// output_padding, dilation, groups, bias), its gradients against central differences.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "test/nn/ops_test_util.h"
#include "workerd/nn/ops/window.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

ValueInfo volume_input(std::int64_t c, std::int64_t d, std::int64_t h, std::int64_t w) {
    return ValueInfo{Dims{Dim::batch_times(1), Dim::of(c), Dim::of(d), Dim::of(h), Dim::of(w)}};
}

struct Conv3dCase {
    int groups;
    std::vector<std::int64_t> stride, dilation, pads;  // pads: [front, top, left, back, bottom, right]
    bool bias;
};

// y[n, o, z, y, x] = b[o] + sum over o's group's inputs i and the kernel of x[n, i, at] w[o, i, k].
std::vector<double> conv3d_ref(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                               std::int64_t n, std::int64_t c, const std::vector<std::int64_t>& in, std::int64_t o,
                               const std::vector<std::int64_t>& k, const Conv3dCase& cc,
                               const std::vector<std::int64_t>& out) {
    const std::int64_t ci = c / cc.groups, co = o / cc.groups;
    const std::int64_t in_size = in[0] * in[1] * in[2], k_size = k[0] * k[1] * k[2];
    std::vector<double> y;
    for (std::int64_t e = 0; e < n; ++e)
        for (std::int64_t f = 0; f < o; ++f)
            for (std::int64_t p = 0; p < out[0] * out[1] * out[2]; ++p) {
                const std::int64_t pos[3] = {p / (out[1] * out[2]), p / out[2] % out[1], p % out[2]};
                double acc = cc.bias ? b[static_cast<std::size_t>(f)] : 0.0;
                for (std::int64_t i = 0; i < ci; ++i)
                    for (std::int64_t q = 0; q < k_size; ++q) {
                        const std::int64_t kq[3] = {q / (k[1] * k[2]), q / k[2] % k[1], q % k[2]};
                        std::int64_t at = 0;
                        bool inside = true;
                        for (std::size_t a = 0; a < 3; ++a) {
                            const std::int64_t v = pos[a] * cc.stride[a] - cc.pads[a] + kq[a] * cc.dilation[a];
                            inside = inside && v >= 0 && v < in[a];
                            at = at * in[a] + v;
                        }
                        if (!inside) continue;
                        acc += x[static_cast<std::size_t>((e * c + (f / co) * ci + i) * in_size + at)] *
                               w[static_cast<std::size_t>((f * ci + i) * k_size + q)];
                    }
                y.push_back(acc);
            }
    return y;
}

struct Transpose3dCase {
    int groups;
    std::vector<std::int64_t> stride, dilation, pads, output_padding;  // pads: ONNX's order
    bool bias;
};

// The scatter form: x[n, i, at] adds x * w[i, o % (O/g), k] to y[n, o, at * s - pad + k * d]
// for every o in i's group (w is PyTorch's [I, O/g, KD, KH, KW]).
std::vector<double> conv_transpose3d_ref(const std::vector<float>& x, const std::vector<float>& w,
                                         const std::vector<float>& b, std::int64_t n, std::int64_t c,
                                         const std::vector<std::int64_t>& in, std::int64_t o,
                                         const std::vector<std::int64_t>& k, const Transpose3dCase& tc,
                                         const std::vector<std::int64_t>& out) {
    const std::int64_t ci = c / tc.groups, co = o / tc.groups;
    const std::int64_t in_size = in[0] * in[1] * in[2], k_size = k[0] * k[1] * k[2];
    const std::int64_t out_size = out[0] * out[1] * out[2];
    std::vector<double> y(static_cast<std::size_t>(n * o * out_size));
    for (std::int64_t e = 0; e < n; ++e)
        for (std::int64_t f = 0; f < o; ++f)
            for (std::int64_t p = 0; p < out_size; ++p)
                y[static_cast<std::size_t>((e * o + f) * out_size + p)] =
                    tc.bias ? b[static_cast<std::size_t>(f)] : 0.0;
    for (std::int64_t e = 0; e < n; ++e)
        for (std::int64_t i = 0; i < c; ++i)
            for (std::int64_t p = 0; p < in_size; ++p) {
                const std::int64_t pos[3] = {p / (in[1] * in[2]), p / in[2] % in[1], p % in[2]};
                const double v = x[static_cast<std::size_t>((e * c + i) * in_size + p)];
                for (std::int64_t j = 0; j < co; ++j)
                    for (std::int64_t q = 0; q < k_size; ++q) {
                        const std::int64_t kq[3] = {q / (k[1] * k[2]), q / k[2] % k[1], q % k[2]};
                        std::int64_t at = 0;
                        bool inside = true;
                        for (std::size_t a = 0; a < 3; ++a) {
                            const std::int64_t u = pos[a] * tc.stride[a] - tc.pads[a] + kq[a] * tc.dilation[a];
                            inside = inside && u >= 0 && u < out[a];
                            at = at * out[a] + u;
                        }
                        if (!inside) continue;
                        const std::int64_t f = (i / ci) * co + j;
                        y[static_cast<std::size_t>((e * o + f) * out_size + at)] +=
                            v * w[static_cast<std::size_t>((i * co + j) * k_size + q)];
                    }
            }
    return y;
}

}  // namespace

TEST_CASE("a 3-D window is planned per axis, pads in ONNX's order", "[nn_ops_conv][conv3d]") {
    const ValueInfo in = volume_input(2, 5, 6, 7);
    // Explicit pads [front, top, left, back, bottom, right], stride and dilation per axis.
    auto w = plan_window_nd(json{1, 0, 2, 0, 1, 2}, in, {3, 2, 3}, {2, 1, 2}, {1, 2, 1}, false, "kernel");
    REQUIRE(w);
    CHECK(std::vector<std::int64_t>{w->kd, w->kh, w->kw} == std::vector<std::int64_t>{3, 2, 3});
    CHECK(std::vector<std::int64_t>{w->pf, w->pk, w->pt, w->pb, w->pl, w->pr} ==
          std::vector<std::int64_t>{1, 0, 0, 1, 2, 2});
    CHECK(window_out_dims(*w, 3) == std::vector<std::int64_t>{2, 5, 5});  // (5+1-3)/2+1, (6+1-3)/1+1, (7+4-3)/2+1
    CHECK(window_onnx_pads(*w, 3) == std::vector<std::int64_t>{1, 0, 2, 0, 1, 2});
    CHECK(window_strides(*w, 3) == std::vector<std::int64_t>{2, 1, 2});
    CHECK(window_dilations(*w, 3) == std::vector<std::int64_t>{1, 2, 1});
    // "same": out = ceil(in / stride) on every axis, the extra pad at the end.
    auto same = plan_window_nd("same", in, {3, 3, 3}, {2, 2, 2}, {1, 1, 1}, false, "kernel");
    REQUIRE(same);
    CHECK(window_out_dims(*same, 3) == std::vector<std::int64_t>{3, 3, 4});
    CHECK(window_onnx_pads(*same, 3) == std::vector<std::int64_t>{1, 0, 1, 1, 1, 1});  // totals 2, 1, 2
    // ceil_mode (a pool): the last window may start in the input only, end pads as it reaches.
    auto ceil = plan_window_nd("valid", in, {2, 2, 2}, {2, 2, 2}, {1, 1, 1}, true, "window");
    REQUIRE(ceil);
    CHECK(window_out_dims(*ceil, 3) == std::vector<std::int64_t>{3, 3, 4});
    CHECK(window_onnx_pads(*ceil, 3) == std::vector<std::int64_t>{0, 0, 0, 1, 0, 1});
    // The 2-D and 1-D windows keep a depth of 1.
    auto flat = plan_window_nd("valid", ValueInfo{Dims{Dim::batch_times(1), Dim::of(1), Dim::of(4), Dim::of(4)}},
                               {2, 2}, {1, 1}, {1, 1}, false, "kernel");
    REQUIRE(flat);
    CHECK(std::vector<std::int64_t>{flat->kd, flat->sd, flat->od, flat->pf, flat->pk} ==
          std::vector<std::int64_t>{1, 1, 1, 0, 0});
    CHECK(window_kernel(*flat, 2) == std::vector<std::int64_t>{2, 2});
}

TEST_CASE("conv2d with a 3-D kernel over N x C x D x H x W matches the reference loop", "[nn_ops_conv][conv3d]") {
    const auto cc = GENERATE(values<Conv3dCase>({{1, {1, 1, 1}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, true},
                                                 {2, {2, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, true},
                                                 {2, {1, 2, 1}, {2, 1, 2}, {0, 1, 2, 2, 0, 1}, false}}));
    CAPTURE(cc.groups, cc.stride, cc.dilation, cc.pads, cc.bias);
    const std::int64_t c = 4, o = 6, batch = 2;
    const std::vector<std::int64_t> in{5, 6, 5}, k{3, 2, 3};
    json layer = {{"kind", "conv2d"},   {"name", "c"},         {"filters", o},
                  {"kernel", k},        {"stride", cc.stride}, {"dilation", cc.dilation},
                  {"padding", cc.pads}, {"groups", cc.groups}, {"bias", cc.bias}};
    if (cc.bias) layer["bias_init"] = {{"kind", "uniform"}, {"limit", 0.5}};
    const auto model = graph_model({layer}, {c, in[0], in[1], in[2]});
    std::vector<std::int64_t> out(3);
    for (std::size_t a = 0; a < 3; ++a)
        out[a] = (in[a] + cc.pads[a] + cc.pads[a + 3] - cc.dilation[a] * (k[a] - 1) - 1) / cc.stride[a] + 1;
    CHECK(concrete(model.value("c").dims, batch) == std::vector<std::int64_t>{batch, o, out[0], out[1], out[2]});
    CHECK(model.tensor("c/w")->shape == std::vector<std::int64_t>{o, c / cc.groups, k[0], k[1], k[2]});
    const auto r = forward_of(model, batch, 5);
    const auto b = cc.bias ? tensor_values(model, r.params, "c/b") : std::vector<float>{};
    check_close(r.output, conv3d_ref(r.input, tensor_values(model, r.params, "c/w"), b, batch, c, in, o, k, cc, out),
                1e-4);
    check_gradients(model, batch, 7);
}

TEST_CASE("3-D pools, batch_norm over N x C x D x H x W, and the conv + batch_norm fold", "[nn_ops_conv][conv3d]") {
    // max_pool 3-D with ceil_mode, avg_pool with count_include_pad, a global pool of 5-D.
    // (No conv bias: a batch norm after it makes its gradient 0, all finite-difference noise.)
    const json layers = {{{"kind", "conv2d"},
                          {"name", "c"},
                          {"filters", 4},
                          {"kernel", {3, 3, 3}},
                          {"padding", "same"},
                          {"bias", false}},
                         {{"kind", "batch_norm"}, {"name", "bn"}},
                         {{"kind", "max_pool"}, {"name", "mp"}, {"window", {2, 2, 2}}, {"ceil_mode", true}},
                         {{"kind", "avg_pool"},
                          {"name", "ap"},
                          {"window", {2, 2, 2}},
                          {"stride", 1},
                          {"padding", {1, 1, 1, 1, 1, 1}},
                          {"count_include_pad", true}},
                         {{"kind", "global_avg_pool"}, {"name", "out"}}};
    const auto model = graph_model(layers, {2, 5, 4, 3});
    CHECK(concrete(model.value("c").dims, 2) == std::vector<std::int64_t>{2, 4, 5, 4, 3});
    CHECK(concrete(model.value("mp").dims, 2) == std::vector<std::int64_t>{2, 4, 3, 2, 2});
    CHECK(concrete(model.value("ap").dims, 2) == std::vector<std::int64_t>{2, 4, 4, 3, 3});
    CHECK(concrete(model.value("out").dims, 2) == std::vector<std::int64_t>{2, 4, 1, 1, 1});
    check_gradients(model, 3, 11, 24, 2e-2, 2);
    check_bf16_against_f32(model, 2, 13);
    // Inference folds the batch norm into the 3-D conv: it must equal the evaluation forward.
    const auto folded = graph_model(
        {layers[0], layers[1], {{"kind", "relu"}}, {{"kind", "max_pool"}, {"name", "out"}, {"window", {1, 2, 2}}}},
        {2, 4, 4, 4});
    std::vector<float> params = random_vector(static_cast<std::size_t>(folded.parameter_count), 15, 0.5);
    for (const auto& t : folded.tensors)
        if (t.name.ends_with("/var"))
            for (std::int64_t i = 0; i < t.size; ++i) params[static_cast<std::size_t>(t.offset + i)] = 0.5f + 0.1f * i;
    const auto x = random_vector(static_cast<std::size_t>(3 * 2 * 4 * 4 * 4), 17);
    std::vector<float> grads(params.size()), none;
    auto train = Network::create(folded, NetworkOptions{3, Precision::kF32, false, false, true}, params, grads);
    auto infer = Network::create(folded, NetworkOptions{3, Precision::kF32, true, false, false}, params, none);
    REQUIRE(train);
    REQUIRE(infer);
    const auto labels = (*infer)->kernel_labels();
    CHECK(std::find(labels.begin(), labels.end(), "conv2d+batch_norm+relu") != labels.end());
    std::copy(x.begin(), x.end(), (*train)->input().begin());
    std::copy(x.begin(), x.end(), (*infer)->input().begin());
    (*train)->forward(false);
    (*infer)->forward(false);
    const std::vector<double> want((*train)->outputs().begin(), (*train)->outputs().end());
    CHECK(rel_l2({(*infer)->outputs().begin(), (*infer)->outputs().end()}, want) < 1e-5);
}

TEST_CASE("conv_transpose with a 3-D kernel matches the scatter loop", "[nn_ops_conv][conv3d][conv_transpose]") {
    // A U-Net decoder's upsampling (stride 2, pad 1, output_padding 1, groups 2); a dilated one
    // with per-axis strides, uneven pads and no bias; stride 2 with no pads.
    const auto tc = GENERATE(values<Transpose3dCase>({{2, {2, 2, 2}, {1, 1, 1}, {1, 1, 1, 1, 1, 1}, {1, 1, 1}, true},
                                                      {1, {1, 2, 1}, {2, 1, 2}, {0, 1, 2, 1, 0, 1}, {0, 1, 0}, false},
                                                      {2, {2, 2, 2}, {1, 1, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0}, true}}));
    const int batch = GENERATE(1, 2);
    CAPTURE(tc.groups, tc.stride, tc.dilation, tc.pads, tc.output_padding, tc.bias, batch);
    const std::int64_t c = 4, o = 6;
    const std::vector<std::int64_t> in{3, 4, 3}, k{3, 2, 3};
    json layer = {{"kind", "conv_transpose"},
                  {"name", "t"},
                  {"filters", o},
                  {"kernel", k},
                  {"stride", tc.stride},
                  {"dilation", tc.dilation},
                  {"padding", tc.pads},
                  {"output_padding", tc.output_padding},
                  {"groups", tc.groups},
                  {"bias", tc.bias}};
    if (tc.bias) layer["bias_init"] = {{"kind", "uniform"}, {"limit", 0.5}};
    const auto model = graph_model({layer}, {c, in[0], in[1], in[2]});
    std::vector<std::int64_t> out(3);
    for (std::size_t a = 0; a < 3; ++a)
        out[a] = (in[a] - 1) * tc.stride[a] - tc.pads[a] - tc.pads[a + 3] + tc.dilation[a] * (k[a] - 1) +
                 tc.output_padding[a] + 1;
    CHECK(concrete(model.value("t").dims, batch) == std::vector<std::int64_t>{batch, o, out[0], out[1], out[2]});
    CHECK(model.tensor("t/w")->shape == std::vector<std::int64_t>{c, o / tc.groups, k[0], k[1], k[2]});
    const auto r = forward_of(model, batch, 51);
    const auto b = tc.bias ? tensor_values(model, r.params, "t/b") : std::vector<float>{};
    check_close(r.output,
                conv_transpose3d_ref(r.input, tensor_values(model, r.params, "t/w"), b, batch, c, in, o, k, tc, out),
                1e-4);
    check_gradients(model, batch, 53);
    check_bf16_against_f32(model, batch, 55);
}

TEST_CASE("3-D windows: shapes that do not fit are refused", "[nn_ops_conv][conv3d]") {
    CHECK_THAT(graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", {3, 3, 3}}}}, {2, 5, 5}),
               Catch::Contains("a 3-D kernel [3, 3, 3] expects an N x C x D x H x W input, got N x 2 x 5 x 5"));
    CHECK_THAT(graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", 3}}}, {2, 4, 5, 5}),
               Catch::Contains("give a 3-D kernel"));
    CHECK_THAT(graph_error({{{"kind", "avg_pool"}, {"window", 2}}}, {2, 4, 5, 5}),
               Catch::Contains("give a 3-D window"));
    CHECK_THAT(graph_error({{{"kind", "max_pool"}, {"window", {2, 2, 2}}}}, {2, 5, 5}),
               Catch::Contains("a 3-D window [2, 2, 2] expects an N x C x D x H x W input"));
    CHECK_THAT(graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", {3, 3, 3}}, {"padding", {1, 1, 1, 1}}}},
                           {2, 4, 5, 5}),
               Catch::Contains("padding"));
    CHECK_THAT(
        graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", {5, 3, 3}}}}, {2, 4, 5, 5}),
        Catch::Contains("kernel 5x3x3 with padding valid on a 4x5x5 input: the kernel is larger than the input"));
    CHECK_THAT(
        graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", {3, 3, 3}}, {"padding", {3, 0, 0, 0, 0, 0}}}},
                    {2, 4, 5, 5}),
        Catch::Contains("padding [3, 0, 0, 0, 0, 0] with a kernel 3x3x3: a pad must be smaller than the kernel"));
    CHECK_THAT(graph_error({{{"kind", "max_pool"}, {"window", {4, 1, 1}}, {"stride", 1}}}, {2, 2, 3, 3}),
               Catch::Contains("window 4x1x1 stride 1x1x1 on a 2x3x3 input: the output would be empty"));
    const json t = {{"kind", "conv_transpose"}, {"filters", 2}, {"kernel", {3, 3, 3}}, {"stride", {2, 1, 2}}};
    CHECK_THAT(graph_error(json::array({t}), {2, 5, 5}),
               Catch::Contains("a 3-D kernel expects an N x C x D x H x W input, got N x 2 x 5 x 5"));
    json too_much = t;
    too_much["output_padding"] = {1, 1, 1};
    CHECK_THAT(graph_error(json::array({too_much}), {2, 3, 5, 5}),
               Catch::Contains("output_padding 1 must be smaller than the stride 1"));
    json short_pads = t;
    short_pads["padding"] = {1, 1, 1, 1};
    CHECK_THAT(graph_error(json::array({short_pads}), {2, 3, 5, 5}), Catch::Contains("padding"));
}

}  // namespace psrun::nn::test
