// reduce_mean, reduce_sum and reduce_prod (workerd/nn/ops/reduce.cpp): forward against a naive
// loop over several axes with and without keepdims, gradients against central differences (and
// prod's exactly where elements are zero), bf16 against f32, statistics of the batch (axes with
// the batch axis) broadcast back, and the axis errors.
#include <catch2/catch.hpp>

#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

TEST_CASE("reduce_mean and reduce_sum over some axes, keepdims either way", "[nn_engine][ops][reduce]") {
    const std::string op = GENERATE("reduce_mean", "reduce_sum");
    const bool keep = GENERATE(true, false);
    const int batch = GENERATE(1, 3);
    INFO(op << (keep ? " keepdims" : "") << " batch " << batch);
    // x: N x 3 x 4 x 5 reduced over axes 1 and -1: N x 4 (x 1s kept).
    const auto model = graph_model({{{"kind", op}, {"name", "out"}, {"axes", {1, -1}}, {"keepdims", keep}}}, {3, 4, 5});
    CHECK(concrete(model.value("out").dims, batch) ==
          (keep ? std::vector<std::int64_t>{batch, 1, 4, 1} : std::vector<std::int64_t>{batch, 4}));
    const auto r = forward_of(model, batch, 3);
    std::vector<double> expected;
    for (std::int64_t n = 0; n < batch; ++n)
        for (std::int64_t h = 0; h < 4; ++h) {
            double s = 0;
            for (std::int64_t c = 0; c < 3; ++c)
                for (std::int64_t w = 0; w < 5; ++w)
                    s += r.input[static_cast<std::size_t>(((n * 3 + c) * 4 + h) * 5 + w)];
            expected.push_back(op == "reduce_mean" ? s / 15.0 : s);
        }
    check_close(r.output, expected);
    check_gradients(model, batch, 5);
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("reduce over consecutive axes (the hand loop): a bag mean, a sequence's first axis, wide rows",
          "[nn_engine][ops][reduce]") {
    struct Case {
        std::vector<std::int64_t> shape;  // after N
        std::vector<std::int64_t> axes;
    };
    const auto c = GENERATE(values<Case>({{{5, 6}, {1}},        // [N, L, D] mean over L (embedding bag)
                                          {{3, 4, 5}, {1, 2}},  // two consecutive axes, inner 5
                                          {{2, 300}, {1}},      // inner 300: two blocks of the loop
                                          {{3, 4, 5}, {-1}},    // the last axis, inner 1
                                          {{1, 5}, {1}},        // an axis of one element: a copy
                                          {{4, 1, 1}, {2, 3}}}));
    const std::string op = GENERATE("reduce_mean", "reduce_sum");
    const int batch = GENERATE(1, 3);
    CAPTURE(c.shape, c.axes, op, batch);
    const auto model = graph_model({{{"kind", op}, {"name", "out"}, {"axes", c.axes}, {"keepdims", false}}}, c.shape);
    const auto r = forward_of(model, batch, 11);
    // Naive: every input element added to the output element of its kept coordinates.
    std::vector<std::int64_t> dims{batch};
    dims.insert(dims.end(), c.shape.begin(), c.shape.end());
    std::vector<bool> reduced(dims.size(), false);
    for (auto a : c.axes)
        reduced[static_cast<std::size_t>(a < 0 ? a + static_cast<std::int64_t>(dims.size()) : a)] = true;
    std::int64_t count = 1, out_size = 1;
    for (std::size_t d = 0; d < dims.size(); ++d) (reduced[d] ? count : out_size) *= dims[d];
    std::vector<double> expected(static_cast<std::size_t>(out_size), 0.0);
    for (std::size_t flat = 0; flat < r.input.size(); ++flat) {
        std::int64_t rest = static_cast<std::int64_t>(flat), out = 0, stride = 1;
        for (std::size_t d = dims.size(); d-- > 0;) {
            const std::int64_t coord = rest % dims[d];
            rest /= dims[d];
            if (!reduced[d]) out += coord * stride, stride *= dims[d];
        }
        expected[static_cast<std::size_t>(out)] += r.input[flat];
    }
    if (op == "reduce_mean")
        for (auto& e : expected) e /= static_cast<double>(count);
    check_close(r.output, expected);
    check_gradients(model, batch, 5);
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("reduce_prod over some axes: forward, gradients, bf16", "[nn_engine][ops][reduce]") {
    const bool keep = GENERATE(true, false);
    const int batch = GENERATE(1, 3);
    CAPTURE(keep, batch);
    // x: N x 2 x 3 x 4 reduced over axes 1 and -1 (8 elements each): N x 3 (x 1s kept).
    const auto model =
        graph_model({{{"kind", "reduce_prod"}, {"name", "out"}, {"axes", {1, -1}}, {"keepdims", keep}}}, {2, 3, 4});
    const auto r = forward_of(model, batch, 3);
    std::vector<double> expected;
    for (std::int64_t n = 0; n < batch; ++n)
        for (std::int64_t h = 0; h < 3; ++h) {
            double p = 1;
            for (std::int64_t c = 0; c < 2; ++c)
                for (std::int64_t w = 0; w < 4; ++w)
                    p *= r.input[static_cast<std::size_t>(((n * 2 + c) * 3 + h) * 4 + w)];
            expected.push_back(p);
        }
    check_close(r.output, expected);
    check_gradients(model, batch, 5);
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("reduce_prod's gradient is the product of the others where elements are zero", "[nn_engine][ops][reduce]") {
    // N x 2 x 3, the product over axis 2: rows {2, 0, 5} (one zero) and {0, 3, 0} (two).
    const auto model =
        graph_model({{{"kind", "reduce_prod"}, {"name", "out"}, {"axes", {2}}, {"keepdims", false}}}, {2, 3});
    LayerHarness h(model, 0, 1, 1);
    const auto y = h.forward({2, 0, 5, 0, 3, 0});
    CHECK(y == std::vector<float>{0, 0});
    const auto dx = h.backward({1.5f, -2.0f});
    // Row 1: d/dx = (0*5, 2*5, 2*0) * 1.5; row 2: (3*0, 0*0, 0*3) * -2 (torch.prod's gradient).
    CHECK(dx == std::vector<float>{0, 15, 0, 0, 0, 0});
}

TEST_CASE("reduce over the batch axis: statistics of the batch, broadcast back over it", "[nn_engine][ops][reduce]") {
    const std::string op = GENERATE("reduce_mean", "reduce_sum", "reduce_max");
    const bool keep = GENERATE(true, false);
    INFO(op << (keep ? " keepdims" : ""));
    // x: N x 4 x 3; m = op over (N, 4): [1, 1, 3] kept, else [3], without a batch axis; out = x - m.
    const auto model =
        graph_model({{{"kind", op}, {"name", "m"}, {"inputs", {"input"}}, {"axes", {0, 1}}, {"keepdims", keep}},
                     {{"kind", "sub"}, {"name", "out"}, {"inputs", {"input", "m"}}}},
                    {4, 3});
    CHECK(concrete(model.value("m").dims, 5) ==
          (keep ? std::vector<std::int64_t>{1, 1, 3} : std::vector<std::int64_t>{3}));
    const int batch = 5;
    const auto r = forward_of(model, batch, 3);
    std::vector<double> stat(3, op == "reduce_max" ? -1e30 : 0.0), expected;
    for (std::size_t i = 0; i < r.input.size(); ++i)
        stat[i % 3] = op == "reduce_max" ? std::max<double>(stat[i % 3], r.input[i]) : stat[i % 3] + r.input[i];
    if (op == "reduce_mean")
        for (auto& s : stat) s /= batch * 4;
    for (std::size_t i = 0; i < r.input.size(); ++i) expected.push_back(r.input[i] - stat[i % 3]);
    check_close(r.output, expected);
    check_gradients(model, batch, 5);  // each example's gradient reaches the others through m
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("reduce: a repeated or out-of-range axis, no axes", "[nn_engine][ops][reduce]") {
    CHECK_THAT(graph_error({{{"kind", "reduce_sum"}, {"axes", {1, -1}}}}, {3}),
               Catch::Contains("axis -1 is given twice"));
    CHECK_THAT(graph_error({{{"kind", "reduce_sum"}, {"axes", {2}}}}, {3}), Catch::Contains("axis 2 for rank 2"));
    CHECK_THAT(graph_error({{{"kind", "reduce_sum"}}}, {3}), Catch::Contains("axes"));
}

}  // namespace
}  // namespace psrun::nn::test
