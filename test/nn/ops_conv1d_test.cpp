// 1-D windows (workerd/nn/ops/conv.cpp, pool.cpp with "kernel"/"window" [k]: PyTorch's Conv1d,
// MaxPool1d, AvgPool1d over N x C x L): forward against naive loops (stride, padding, dilation,
// groups, bias, ceil_mode), gradients against central differences, bf16 against f32, the
// conv + batch_norm fold over N x C x L, and the errors.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

struct Conv1dCase {
    int groups, stride, dilation, pad_l, pad_r;
    bool bias;
};

// y[n, o, t] = b[o] + sum_{i in o's group, k} x[n, i, t * stride - pad_l + k * dilation] w[o, i, k].
std::vector<double> conv1d_ref(const std::vector<float>& x, const std::vector<float>& w, const std::vector<float>& b,
                               std::int64_t n, std::int64_t c, std::int64_t len, std::int64_t o, std::int64_t k,
                               const Conv1dCase& cc) {
    const std::int64_t out = (len + cc.pad_l + cc.pad_r - cc.dilation * (k - 1) - 1) / cc.stride + 1;
    const std::int64_t ci = c / cc.groups, co = o / cc.groups;
    std::vector<double> y(static_cast<std::size_t>(n * o * out));
    for (std::int64_t e = 0; e < n; ++e)
        for (std::int64_t f = 0; f < o; ++f)
            for (std::int64_t t = 0; t < out; ++t) {
                double acc = cc.bias ? b[static_cast<std::size_t>(f)] : 0.0;
                for (std::int64_t i = 0; i < ci; ++i)
                    for (std::int64_t q = 0; q < k; ++q) {
                        const std::int64_t at = t * cc.stride - cc.pad_l + q * cc.dilation;
                        if (at < 0 || at >= len) continue;
                        acc += x[static_cast<std::size_t>((e * c + (f / co) * ci + i) * len + at)] *
                               w[static_cast<std::size_t>((f * ci + i) * k + q)];
                    }
                y[static_cast<std::size_t>((e * o + f) * out + t)] = acc;
            }
    return y;
}

}  // namespace

TEST_CASE("conv2d with a 1-D kernel over N x C x L matches the reference loop", "[nn_ops_conv][conv1d]") {
    const auto cc = GENERATE(values<Conv1dCase>({{1, 1, 1, 1, 1, true},
                                                 {1, 2, 1, 0, 0, true},
                                                 {2, 1, 2, 2, 2, false},
                                                 {4, 2, 2, 1, 2, true},
                                                 {1, 3, 1, 2, 0, false}}));
    const int batch = GENERATE(1, 3);
    CAPTURE(cc.groups, cc.stride, cc.dilation, cc.pad_l, cc.pad_r, cc.bias, batch);
    const std::int64_t c = 4, len = 13, o = 8, k = 3;
    json layer = {{"kind", "conv2d"},
                  {"name", "c"},
                  {"filters", o},
                  {"kernel", {k}},
                  {"stride", cc.stride},
                  {"dilation", {cc.dilation}},
                  {"padding", {cc.pad_l, cc.pad_r}},
                  {"groups", cc.groups},
                  {"bias", cc.bias}};
    if (cc.bias) layer["bias_init"] = {{"kind", "uniform"}, {"limit", 0.5}};
    const auto model = graph_model({layer}, {c, len});
    const std::int64_t out = (len + cc.pad_l + cc.pad_r - cc.dilation * (k - 1) - 1) / cc.stride + 1;
    CHECK(concrete(model.value("c").dims, batch) == std::vector<std::int64_t>{batch, o, out});
    CHECK(model.tensor("c/w")->shape == std::vector<std::int64_t>{o, c / cc.groups, k});
    const auto r = forward_of(model, batch, 5);
    const auto b = cc.bias ? tensor_values(model, r.params, "c/b") : std::vector<float>{};
    check_close(r.output, conv1d_ref(r.input, tensor_values(model, r.params, "c/w"), b, batch, c, len, o, k, cc), 1e-4);
    check_gradients(model, batch, 7);
    check_bf16_against_f32(model, batch, 9);
}

TEST_CASE("conv1d + relu, same padding, and the conv + batch_norm fold over N x C x L", "[nn_ops_conv][conv1d]") {
    // relu joins the conv as a post-op; "same" pads a 1-D kernel like a 2-D one.
    const json layers = {{{"kind", "conv2d"}, {"name", "c"}, {"filters", 6}, {"kernel", {5}}, {"padding", "same"}},
                         {{"kind", "relu"}},
                         {{"kind", "conv2d"}, {"filters", 4}, {"kernel", {3}}, {"stride", {2}}, {"bias", false}},
                         {{"kind", "batch_norm"}, {"epsilon", 1e-3}},
                         {{"kind", "tanh"}, {"name", "out"}}};
    const auto trained = graph_model(layers, {3, 16});
    CHECK(concrete(trained.value("c").dims, 2) == std::vector<std::int64_t>{2, 6, 16});
    CHECK(concrete(trained.value("out").dims, 2) == std::vector<std::int64_t>{2, 4, 7});
    // The relu's kinks: a bias moves all of a channel's N x 16 pre-activations, some within the
    // finite difference's step of 0 (the exact gradients are checked without relu above).
    check_gradients(trained, 2, 11, 24, 2e-2, 2);
    check_bf16_against_f32(trained, 4, 13);
    auto folded = layers;
    folded.back() = {{"kind", "relu"}, {"name", "out"}};
    const auto model = graph_model(folded, {3, 16});
    // Inference folds the batch norm into the 1-D conv: it must equal the evaluation forward.
    std::vector<float> params = random_vector(static_cast<std::size_t>(model.parameter_count), 15, 0.5);
    const TensorDef* var = nullptr;
    for (const auto& t : model.tensors)
        if (t.name.ends_with("/var")) var = &t;
    REQUIRE(var != nullptr);
    for (std::int64_t i = 0; i < var->size; ++i)
        params[static_cast<std::size_t>(var->offset + i)] = 0.5f + 0.1f * static_cast<float>(i);
    const auto x = random_vector(static_cast<std::size_t>(3 * 3 * 16), 17);
    std::vector<float> grads(params.size()), none;
    auto train = Network::create(model, NetworkOptions{3, Precision::kF32, false, false, true}, params, grads);
    auto infer = Network::create(model, NetworkOptions{3, Precision::kF32, true, false, false}, params, none);
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

TEST_CASE("1-D max_pool and avg_pool match the reference loop", "[nn_ops_conv][pool1d]") {
    struct PoolCase {
        const char* kind;
        int window, stride, pad_l, pad_r;
        bool ceil, include_pad;
    };
    const auto pc = GENERATE(values<PoolCase>({{"max_pool", 2, 2, 0, 0, false, false},
                                               {"max_pool", 3, 2, 1, 1, true, false},
                                               {"avg_pool", 2, 2, 0, 0, false, false},
                                               {"avg_pool", 3, 2, 1, 1, false, false},
                                               {"avg_pool", 3, 1, 1, 1, false, true},
                                               {"global_avg_pool", 0, 0, 0, 0, false, false},
                                               {"global_max_pool", 0, 0, 0, 0, false, false}}));
    CAPTURE(pc.kind, pc.window, pc.stride, pc.pad_l, pc.pad_r, pc.ceil, pc.include_pad);
    const std::string kind = pc.kind;
    const bool global = kind.starts_with("global");
    const std::int64_t c = 3, len = 12, batch = 2;
    json layer = {{"kind", kind}, {"name", "p"}};
    if (!global) {
        layer["window"] = {pc.window};
        layer["stride"] = pc.stride;
        layer["padding"] = {pc.pad_l, pc.pad_r};
        if (pc.ceil) layer["ceil_mode"] = true;
        if (pc.include_pad) layer["count_include_pad"] = true;
    }
    const auto model = graph_model({layer}, {c, len});
    const std::int64_t k = global ? len : pc.window, s = global ? len : pc.stride;
    const std::int64_t span = len + pc.pad_l + pc.pad_r - k;
    std::int64_t out = (pc.ceil ? (span + s - 1) / s : span / s) + 1;
    if (pc.ceil && (out - 1) * s >= len + pc.pad_l) --out;
    CHECK(concrete(model.value("p").dims, batch) == std::vector<std::int64_t>{batch, c, out});
    const auto r = forward_of(model, batch, 21);
    std::vector<double> expected;
    for (std::int64_t row = 0; row < batch * c; ++row)
        for (std::int64_t t = 0; t < out; ++t) {
            double best = -1e30, sum = 0;
            std::int64_t count = 0, cells = 0;
            for (std::int64_t q = 0; q < k; ++q) {
                const std::int64_t at = t * s - pc.pad_l + q;
                if (at < len + pc.pad_r) ++cells;
                if (at < 0 || at >= len) continue;
                const double v = r.input[static_cast<std::size_t>(row * len + at)];
                best = std::max(best, v);
                sum += v;
                ++count;
            }
            const bool max = kind.find("max") != std::string::npos;
            expected.push_back(max ? best : sum / static_cast<double>(pc.include_pad ? cells : count));
        }
    check_close(r.output, expected);
    check_gradients(model, batch, 23, 24, 2e-2, kind.find("max") != std::string::npos ? 2 : 0);
    check_bf16_against_f32(model, batch, 25);
}

TEST_CASE("1-D windows: shapes that do not fit are refused", "[nn_ops_conv][conv1d][pool1d]") {
    CHECK_THAT(graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", {3}}}}, {2, 5, 5}),
               Catch::Contains("a 1-D kernel [3] expects an N x C x L input, got N x 2 x 5 x 5"));
    CHECK_THAT(graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", 3}}}, {2, 5}),
               Catch::Contains("give a 1-D kernel"));
    CHECK_THAT(graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", {3}}, {"padding", {1, 1, 1, 1}}}}, {2, 5}),
               Catch::Contains("padding"));
    CHECK_THAT(graph_error({{{"kind", "max_pool"}, {"window", {2}}}}, {2, 5, 5}),
               Catch::Contains("a 1-D window [2] expects an N x C x L input"));
    CHECK_THAT(graph_error({{{"kind", "avg_pool"}, {"window", 2}}}, {2, 5}), Catch::Contains("give a 1-D window"));
    CHECK_THAT(
        graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", {7}}}}, {2, 5}),
        Catch::Contains("kernel 7 with padding valid on an input of length 5: the kernel is larger than the input"));
    CHECK_THAT(graph_error({{{"kind", "conv2d"}, {"filters", 2}, {"kernel", {3}}, {"padding", {3, 0}}}}, {2, 5}),
               Catch::Contains("padding [3, 0] with a kernel 3: a pad must be smaller than the kernel"));
    CHECK_THAT(graph_error({{{"kind", "max_pool"}, {"window", {4}}, {"stride", 1}}}, {2, 2}),
               Catch::Contains("window 4 stride 1 on an input of length 2: the output would be empty"));
}

}  // namespace psrun::nn::test
