// The element-wise kinds of issue 34: selu, hard_sigmoid, mish, reciprocal (activation.cpp),
// prelu, maximum/minimum/where (select.cpp), equal/less/greater/not/cast (mask.cpp), expand,
// reduce_max/reduce_min, and softmax after a -inf mask: forward against reference loops,
// gradients against central differences, bf16 against f32, and the shape errors.
#include <catch2/catch.hpp>

#include <cmath>
#include <limits>

#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

double reference_activation(const std::string& op, double x) {
    if (op == "selu") return 1.0507009873554805 * (x > 0 ? x : 1.6732632423543772 * (std::exp(x) - 1));
    if (op == "hard_sigmoid") return std::clamp(x / 6.0 + 0.5, 0.0, 1.0);
    if (op == "mish") return x * std::tanh(std::log1p(std::exp(x)));
    return 1.0 / x;  // reciprocal (of 1.5 + x, below)
}

TEST_CASE("selu, hard_sigmoid, mish, reciprocal: forward, finite differences, bf16", "[eltwise][activation]") {
    const std::string op = GENERATE("selu", "hard_sigmoid", "mish", "reciprocal");
    const int batch = GENERATE(1, 3);
    CAPTURE(op, batch);
    // reciprocal reads 1.5 + x (away from 0).
    json layers = json::array();
    std::string in = "input";
    if (op == "reciprocal") {
        layers.push_back({{"kind", "constant"}, {"name", "c"}, {"shape", json::array()}, {"values", {1.5}}});
        layers.push_back({{"kind", "add"}, {"name", "shifted"}, {"inputs", {"input", "c"}}});
        in = "shifted";
    }
    layers.push_back({{"kind", op}, {"name", "out"}, {"inputs", {in}}});
    const auto model = graph_model(layers, {3, 4, 5});
    const auto r = forward_of(model, batch, 3);
    std::vector<double> expected;
    for (const float x : r.input) expected.push_back(reference_activation(op, op == "reciprocal" ? x + 1.5 : x));
    check_close(r.output, expected, 1e-5);
    check_gradients(model, batch, 5, 24, 2e-2, op == "selu" ? 1 : 0);  // selu's kink at 0
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("hard_sigmoid with ONNX's alpha 0.2 and a clipping slope; selu's fields", "[eltwise][activation]") {
    const auto model = graph_model({{{"kind", "hard_sigmoid"}, {"name", "out"}, {"alpha", 2.0}, {"beta", 0.5}}}, {40});
    const auto r = forward_of(model, 2, 3);
    std::vector<double> expected;
    for (const float x : r.input) expected.push_back(std::clamp(2.0 * x + 0.5, 0.0, 1.0));
    check_close(r.output, expected);
    check_gradients(model, 2, 5, 24, 2e-2, 2);  // kinks at the clip ends
    const auto onnx = graph_model({{{"kind", "hard_sigmoid"}, {"name", "out"}, {"alpha", 0.2}}}, {8});
    CHECK(onnx.nodes[0].attrs.at("beta") == 0.5);
    const auto selu = graph_model({{{"kind", "selu"}, {"name", "out"}}}, {8});
    CHECK(std::fabs(selu.nodes[0].attrs.at("gamma").get<double>() - 1.0507) < 1e-4);
}

TEST_CASE("prelu: a slope per channel or shared, as a tensor or a value", "[eltwise][prelu]") {
    struct Case {
        json layers;
        bool shared;
    };
    const auto c = GENERATE(values<Case>({
        {json{{{"kind", "prelu"}, {"name", "out"}}}, false},
        {json{{{"kind", "prelu"}, {"name", "out"}, {"shared", true}}}, true},
        {json{{{"kind", "parameter"}, {"name", "p"}, {"shape", {3, 1, 1}}},
              {{"kind", "prelu"}, {"name", "out"}, {"inputs", {"input", "p"}}}},
         false},
        {json{{{"kind", "parameter"}, {"name", "p"}, {"shape", {1}}},
              {{"kind", "prelu"}, {"name", "out"}, {"inputs", {"input", "p"}}}},
         true},
    }));
    const int batch = GENERATE(1, 2);
    CAPTURE(c.layers.dump(), batch);
    const auto model = graph_model(c.layers, {3, 4, 5});
    const auto r = forward_of(model, batch, 3);
    const auto slope = tensor_values(model, r.params, model.tensors[0].name);
    REQUIRE(slope.size() == (c.shared ? 1u : 3u));
    std::vector<double> expected;
    for (std::size_t e = 0; e < r.input.size(); ++e) {
        const float a = slope[c.shared ? 0 : (e / 20) % 3];
        expected.push_back(r.input[e] > 0 ? r.input[e] : a * r.input[e]);
    }
    check_close(r.output, expected);
    check_gradients(model, batch, 5, 24, 2e-2, 1);  // the kink at 0
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("prelu: a slope neither shared nor per channel is refused", "[eltwise][prelu]") {
    CHECK_THAT(graph_error({{{"kind", "parameter"}, {"name", "p"}, {"shape", {3}}},
                            {{"kind", "prelu"}, {"inputs", {"input", "p"}}}},
                           {3, 4, 5}),
               Catch::Contains("neither one value nor one per channel"));
}

TEST_CASE("maximum and minimum broadcast; where picks x or y by a mask", "[eltwise][select]") {
    const std::string op = GENERATE("maximum", "minimum", "where");
    const int batch = GENERATE(1, 3);
    const bool column = GENERATE(false, true);  // p broadcast over the rows ([4]) or along the last axis ([3, 1])
    CAPTURE(op, batch, column);
    // x: N x 3 x 4; p: a parameter [4] or [3, 1] (drawn by its initializer); where's mask: x > 0.
    const json p_shape = column ? json{3, 1} : json{4};
    json layers = {
        {{"kind", "parameter"}, {"name", "p"}, {"shape", p_shape}, {"init", {{"kind", "uniform"}, {"limit", 1.0}}}}};
    if (op == "where") {
        layers.push_back({{"kind", "constant"}, {"name", "zero"}, {"shape", json::array()}, {"values", {0.0}}});
        layers.push_back({{"kind", "greater"}, {"name", "mask"}, {"inputs", {"input", "zero"}}});
        layers.push_back({{"kind", "tanh"}, {"name", "t"}, {"inputs", {"input"}}});
        layers.push_back({{"kind", "where"}, {"name", "out"}, {"inputs", {"mask", "t", "p"}}});
    } else {
        layers.push_back({{"kind", op}, {"name", "out"}, {"inputs", {"input", "p"}}});
    }
    const auto model = graph_model(layers, {3, 4});
    const auto r = forward_of(model, batch, 3);
    const auto p = tensor_values(model, r.params, "p/value");
    std::vector<double> expected;
    for (std::size_t e = 0; e < r.input.size(); ++e) {
        const double x = r.input[e], q = column ? p[(e / 4) % 3] : p[e % 4];
        expected.push_back(op == "maximum"   ? std::max(x, q)
                           : op == "minimum" ? std::min(x, q)
                           : x > 0           ? std::tanh(x)
                                             : q);
    }
    check_close(r.output, expected);
    check_gradients(model, batch, 5, 24, 2e-2, 1);  // a tie, or the mask flipping at 0
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("a padding mask from integer ids: equal, not, cast, where on embeddings", "[eltwise][mask]") {
    // ids [N, 6]; mask = not(ids == 0) as [N, 6, 1]; where(mask, emb, 0) summed over positions,
    // divided by max(count, 1): masked mean pooling.
    const json layers = {
        {{"kind", "constant"}, {"name", "pad"}, {"shape", json::array()}, {"type", "int"}, {"values", {0}}},
        {{"kind", "equal"}, {"name", "is_pad"}, {"inputs", {"input", "pad"}}},
        {{"kind", "not"}, {"name", "keep"}},
        {{"kind", "unsqueeze"}, {"name", "keep3"}, {"axes", {2}}},
        {{"kind", "embedding"}, {"name", "emb"}, {"inputs", {"input"}}, {"vocabulary", 4}, {"dim", 3}},
        {{"kind", "constant"}, {"name", "fzero"}, {"shape", json::array()}, {"values", {0.0}}},
        {{"kind", "where"}, {"name", "kept"}, {"inputs", {"keep3", "emb", "fzero"}}},
        {{"kind", "reduce_sum"}, {"name", "sum"}, {"axes", {1}}, {"keepdims", false}},
        {{"kind", "cast"}, {"name", "keepf"}, {"inputs", {"keep"}}, {"to", "float"}},
        {{"kind", "reduce_sum"}, {"name", "count"}, {"axes", {1}}, {"keepdims", true}},
        {{"kind", "clip"}, {"name", "count1"}, {"min", 1.0}, {"max", 1e9}},
        {{"kind", "div"}, {"name", "out"}, {"inputs", {"sum", "count1"}}},
    };
    const auto model = graph_model(layers, {6}, "int");
    CHECK(model.value("keep").type == ElementType::kInt);
    CHECK(model.value("keepf").type == ElementType::kFloat);
    const int batch = 3;
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    initialize_parameters(model, 5, params);
    const std::vector<std::int32_t> ids = {1, 2, 0, 0, 3, 0, 0, 0, 0, 0, 0, 0, 3, 3, 1, 2, 1, 1};
    std::vector<float> grads;
    auto net = Network::create(model, NetworkOptions{batch, Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    (*net)->forward(false);
    const std::vector<float> out((*net)->outputs().begin(), (*net)->outputs().end());
    const auto table = tensor_values(model, params, model.tensors[0].name);
    std::vector<double> expected;
    for (int n = 0; n < batch; ++n)
        for (int j = 0; j < 3; ++j) {
            double s = 0;
            int count = 0;
            for (int l = 0; l < 6; ++l) {
                const int id = ids[static_cast<std::size_t>(n * 6 + l)];
                if (id != 0) s += table[static_cast<std::size_t>(id * 3 + j)], ++count;
            }
            expected.push_back(s / std::max(count, 1));
        }
    check_close(out, expected);
    check_gradients(model, batch, 9, 24, 2e-2, 0, 4);
}

TEST_CASE("expand: a class token broadcast over the batch; its gradient sums", "[eltwise][expand]") {
    // cls [1, 1, 4] -> [N, 1, 4], concatenated before the input's [N, 3, 4].
    const json layers = {
        {{"kind", "parameter"}, {"name", "cls"}, {"shape", {1, 1, 4}}, {"init", {{"kind", "uniform"}, {"limit", 1.0}}}},
        {{"kind", "expand"}, {"name", "tok"}, {"shape", {"N", 1, 1}}},
        {{"kind", "concat"}, {"name", "out"}, {"inputs", {"tok", "input"}}, {"axis", 1}}};
    const auto model = graph_model(layers, {3, 4});
    CHECK(model.value("tok").dims == Dims{Dim::batch_times(1), Dim::of(1), Dim::of(4)});
    const int batch = GENERATE(1, 3);
    const auto r = forward_of(model, batch, 3);
    const auto cls = tensor_values(model, r.params, "cls/value");
    std::vector<double> expected;
    for (int n = 0; n < batch; ++n) {
        for (int j = 0; j < 4; ++j) expected.push_back(cls[static_cast<std::size_t>(j)]);
        for (int j = 0; j < 12; ++j) expected.push_back(r.input[static_cast<std::size_t>(n * 12 + j)]);
    }
    check_close(r.output, expected);
    check_gradients(model, batch, 5);
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("expand of an integer mask (an attention mask over heads)", "[eltwise][expand][mask]") {
    const json layers = {
        {{"kind", "constant"}, {"name", "pad"}, {"shape", json::array()}, {"type", "int"}, {"values", {0}}},
        {{"kind", "equal"}, {"name", "is_pad"}, {"inputs", {"input", "pad"}}},
        {{"kind", "unsqueeze"}, {"name", "m"}, {"axes", {1}}},
        {{"kind", "expand"}, {"name", "heads"}, {"shape", {"N", 2, 5}}},
        {{"kind", "cast"}, {"name", "out"}, {"to", "float"}}};
    const auto model = graph_model(layers, {5}, "int");
    CHECK(model.value("heads").type == ElementType::kInt);
    const std::vector<std::int32_t> ids = {0, 3, 0, 1, 2, 4, 4, 0, 0, 1};
    std::vector<float> params, grads;
    auto net = Network::create(model, NetworkOptions{2, Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    (*net)->forward(false);
    const std::vector<float> out((*net)->outputs().begin(), (*net)->outputs().end());
    std::vector<double> expected;
    for (int n = 0; n < 2; ++n)
        for (int h = 0; h < 2; ++h)
            for (int l = 0; l < 5; ++l) expected.push_back(ids[static_cast<std::size_t>(n * 5 + l)] == 0 ? 1.0 : 0.0);
    check_close(out, expected);
}

TEST_CASE("reduce_max and reduce_min over some axes, keepdims either way", "[eltwise][reduce]") {
    const std::string op = GENERATE("reduce_max", "reduce_min");
    const auto axes = GENERATE(json::array({1, -1}), json::array({2}), json::array({-1}), json::array({2, 3}));
    const bool keep = GENERATE(true, false);
    const int batch = GENERATE(1, 3);
    CAPTURE(op, axes.dump(), keep, batch);
    const auto model = graph_model({{{"kind", op}, {"name", "out"}, {"axes", axes}, {"keepdims", keep}}}, {3, 4, 5});
    const auto r = forward_of(model, batch, 3);
    const std::vector<std::int64_t> dims = {batch, 3, 4, 5};
    std::vector<bool> reduced(4, false);
    for (const auto& a : axes)
        reduced[static_cast<std::size_t>(a.get<int>() < 0 ? a.get<int>() + 4 : a.get<int>())] = true;
    std::int64_t outs = 1;
    for (std::size_t d = 0; d < 4; ++d) outs *= reduced[d] ? 1 : dims[d];
    std::vector<double> expected(static_cast<std::size_t>(outs), op == "reduce_max" ? -1e30 : 1e30);
    for (std::size_t flat = 0; flat < r.input.size(); ++flat) {
        const auto c = coords_of(static_cast<std::int64_t>(flat), dims);
        std::int64_t o = 0;
        for (std::size_t d = 0; d < 4; ++d)
            if (!reduced[d]) o = o * dims[d] + c[d];
        auto& e = expected[static_cast<std::size_t>(o)];
        e = op == "reduce_max" ? std::max<double>(e, r.input[flat]) : std::min<double>(e, r.input[flat]);
    }
    check_close(r.output, expected);
    check_gradients(model, batch, 5, 24, 2e-2, 2);  // values closer than the step (1e-2) swap places
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("reduce_max shares dY among ties equally (bits kept by the forward)", "[eltwise][reduce]") {
    // y[n, r] = max_j (x + p)[n, r, j] over x = 0: row 0 = [1, 1, 0.5, 1] ties three ways, row 1
    // = [0, 2, 0, 0] has one maximum. Every example sees the same, so dp[r] = dy[r] * share
    // summed over the batch: dp[0] = dy0 / 3 at 0, 1, 3 and 0 at 2; dp[1] = dy1 at 1 only.
    const json layers = {{{"kind", "parameter"}, {"name", "p"}, {"shape", {2, 4}}},
                         {{"kind", "add"}, {"name", "s"}, {"inputs", {"input", "p"}}},
                         {{"kind", "reduce_max"}, {"name", "out"}, {"axes", {2}}, {"keepdims", false}}};
    const auto model = graph_model(layers, {2, 4});
    std::vector<float> params = {1, 1, 0.5f, 1, 0, 2, 0, 0}, grads(params.size(), 0.0f);
    REQUIRE(static_cast<std::size_t>(model.parameter_count) == params.size());
    NetworkOptions options;
    options.batch_size = 2;
    auto net = Network::create(model, options, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    for (auto& v : (*net)->input(0)) v = 0.0f;
    for (auto& t : (*net)->targets()) t = 0.0f;
    (*net)->train_step(1);
    const float share = grads[0];
    CHECK(share != 0.0f);
    CHECK(grads[1] == share);
    CHECK(grads[2] == 0.0f);
    CHECK(grads[3] == share);
    CHECK(grads[4] == 0.0f);
    CHECK(grads[6] == 0.0f);
    CHECK(grads[7] == 0.0f);
    // dy = d(y - 0)^2/dy = 2y: 2 for row 0 (split three ways), 4 for row 1.
    CHECK(grads[5] == Approx(share * 6.0f).epsilon(1e-6));
}

TEST_CASE("softmax after a causal -inf mask: exact zeros, no NaN forward or backward", "[eltwise][softmax]") {
    // scores [N, 4, 4] + triu(-inf, 1); a fully masked row (the last constant) must not crash.
    const float inf = std::numeric_limits<float>::infinity();
    std::vector<double> mask(16, 0.0);
    for (int i = 0; i < 4; ++i)
        for (int j = i + 1; j < 4; ++j) mask[static_cast<std::size_t>(i * 4 + j)] = -inf;
    const json layers = {{{"kind", "constant"}, {"name", "mask"}, {"shape", {4, 4}}, {"values", mask}},
                         {{"kind", "add"}, {"name", "masked"}, {"inputs", {"input", "mask"}}},
                         {{"kind", "softmax"}, {"name", "out"}, {"axis", -1}}};
    const auto model = graph_model(layers, {4, 4});
    const int batch = 2;
    const auto r = forward_of(model, batch, 3);
    std::vector<double> expected;
    for (int row = 0; row < batch * 4; ++row) {
        const int i = row % 4;
        double m = -1e30, s = 0;
        for (int j = 0; j <= i; ++j) m = std::max<double>(m, r.input[static_cast<std::size_t>(row * 4 + j)]);
        for (int j = 0; j <= i; ++j) s += std::exp(r.input[static_cast<std::size_t>(row * 4 + j)] - m);
        for (int j = 0; j < 4; ++j)
            expected.push_back(j <= i ? std::exp(r.input[static_cast<std::size_t>(row * 4 + j)] - m) / s : 0.0);
    }
    check_close(r.output, expected);
    for (std::size_t e = 0; e < r.output.size(); ++e)
        if (expected[e] == 0.0) CHECK(r.output[e] == 0.0f);
    check_gradients(model, batch, 5);
    check_bf16_against_f32(model, batch, 7);
    // A fully masked row: NaN is the user's (as PyTorch), but forward and backward run.
    std::vector<double> full(16, -inf);
    const auto all = graph_model({{{"kind", "constant"}, {"name", "mask"}, {"shape", {4, 4}}, {"values", full}},
                                  {{"kind", "add"}, {"name", "masked"}, {"inputs", {"input", "mask"}}},
                                  {{"kind", "softmax"}, {"name", "out"}, {"axis", -1}}},
                                 {4, 4});
    std::vector<float> params, grads;
    auto net = Network::create(all, NetworkOptions{batch, Precision::kF32, true}, params, grads);
    REQUIRE(net);
    (*net)->forward(false);
}

TEST_CASE("element-wise kinds refuse integers where they need floats", "[eltwise][errors]") {
    CHECK_THAT(graph_error({{{"kind", "selu"}}}, {3}, "int"), Catch::Contains("expects floats"));
    // Integers with integers select integers (ops_top_k_test.cpp); with floats they are refused.
    CHECK_THAT(graph_error({{{"kind", "constant"}, {"name", "c"}, {"shape", {3}}, {"values", {1, 2, 3}}},
                            {{"kind", "maximum"}, {"inputs", {"input", "c"}}}},
                           {3}, "int"),
               Catch::Contains("input 1 (c) holds floats where input 0 (input) holds integers: cast one of them"));
    CHECK_THAT(graph_error({{{"kind", "expand"}, {"shape", {5}}}}, {3}), Catch::Contains("do not broadcast"));
    CHECK_THAT(graph_error({{{"kind", "expand"}, {"shape", {"N", "N", 3}}}}, {3}),
               Catch::Contains("has the batch on more than one axis"));
}

TEST_CASE("reshape: a shape whose product overflows is refused, not computed (fuzz_onnx)", "[eltwise][errors]") {
    CHECK_THAT(graph_error({{{"kind", "reshape"}, {"shape", {"N", 2147483647, 2147483647, 2147483647}}}}, {3}),
               Catch::Contains("values per example"));
    CHECK_THAT(graph_error({{{"kind", "reshape"}, {"shape", {"N", 65536, 65536}}}}, {3}),
               Catch::Contains("holds more than 2147483647 values per example"));
}

}  // namespace
}  // namespace psrun::nn::test
