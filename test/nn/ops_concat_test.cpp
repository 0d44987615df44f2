// concat and split (workerd/nn/ops/concat.cpp): forward against index arithmetic on odd
// shapes, a value joined with itself, a split output left unread (its gradient is zero),
// gradients against central differences, bf16 against f32, and the shape errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

TEST_CASE("concat joins values along an axis: three inputs, one of them twice", "[nn_engine][ops][concat]") {
    const std::int64_t axis = GENERATE(1, -1);
    const int batch = GENERATE(1, 3);
    INFO("axis " << axis << " batch " << batch);
    // x: N x 3 x 4; t = tanh(x); out = concat(x, t, x) along axis (3+3+3 or 4+4+4).
    const json layers = {{{"kind", "tanh"}, {"name", "t"}},
                         {{"kind", "concat"}, {"name", "out"}, {"inputs", {"input", "t", "input"}}, {"axis", axis}}};
    const auto model = graph_model(layers, {3, 4});
    const auto r = forward_of(model, batch, 3);
    const std::size_t ax = axis < 0 ? 2 : 1;
    const std::vector<std::int64_t> in = {batch, 3, 4};
    auto od = in;
    od[ax] *= 3;
    std::vector<double> expected;
    for (std::int64_t e = 0; e < count_of(od); ++e) {
        auto c = coords_of(e, od);
        const std::int64_t part = c[ax] / in[ax];
        c[ax] %= in[ax];
        const double x = r.input[static_cast<std::size_t>((c[0] * 3 + c[1]) * 4 + c[2])];
        expected.push_back(part == 1 ? std::tanh(x) : x);
    }
    check_close(r.output, expected);
    check_gradients(model, batch, 5);
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("split cuts a value into parts; joined back in another order; an unread part", "[nn_engine][ops][concat]") {
    const int batch = GENERATE(1, 3);
    // x: N x 6 x 5 split along 1 into 1, 2, 3: out = concat(s:2, tanh(s), s:1).
    const json layers = {{{"kind", "split"}, {"name", "s"}, {"axis", 1}, {"sizes", {1, 2, 3}}},
                         {{"kind", "tanh"}, {"name", "t"}, {"inputs", "s"}},
                         {{"kind", "concat"}, {"name", "out"}, {"inputs", {"s:2", "t", "s:1"}}, {"axis", -2}}};
    const auto model = graph_model(layers, {6, 5});
    const auto r = forward_of(model, batch, 9);
    const int from[6] = {3, 4, 5, 0, 1, 2};  // output row -> input row
    std::vector<double> expected;
    for (std::int64_t e = 0; e < batch * 6 * 5; ++e) {
        const auto c = coords_of(e, {batch, 6, 5});
        const double x = r.input[static_cast<std::size_t>((c[0] * 6 + from[c[1]]) * 5 + c[2])];
        expected.push_back(c[1] == 3 ? std::tanh(x) : x);
    }
    check_close(r.output, expected);
    check_gradients(model, batch, 11);
    check_bf16_against_f32(model, batch, 13);
    // Only the second part read: the others get zero gradient.
    const auto partial = graph_model({{{"kind", "split"}, {"name", "s"}, {"axis", -1}, {"sizes", {2, 3}}},
                                      {{"kind", "sigmoid"}, {"name", "out"}, {"inputs", "s:1"}}},
                                     {4, 5});
    check_gradients(partial, batch, 15);
}

TEST_CASE("concat and split: mismatched dims, the batch axis, sizes, integer inputs", "[nn_engine][ops][concat]") {
    CHECK_THAT(
        graph_error({{{"kind", "tanh"}, {"name", "t"}},
                     {{"kind", "transpose"}, {"name", "u"}, {"perm", {0, 2, 1}}},
                     {{"kind", "concat"}, {"inputs", {"input", "u"}}, {"axis", 1}}},
                    {3, 4}),
        Catch::Contains(
            "layer 2 (concat): input 1 (u) is N x 4 x 3 where input 0 is N x 3 x 4; every dim but axis 1 must match"));
    CHECK_THAT(graph_error({{{"kind", "concat"}, {"inputs", {"input", "input"}}, {"axis", 0}}}, {3}),
               Catch::Contains("axis 0 of N x 3 is the batch dim"));
    CHECK_THAT(graph_error({{{"kind", "concat"}, {"inputs", {"input", "input"}}}}, {3}), Catch::Contains("axis"));
    CHECK_THAT(graph_error({{{"kind", "split"}, {"axis", 1}, {"sizes", {2, 2}}}}, {5}),
               Catch::Contains("add up to 4; dim 1 of N x 5 is 5"));
    CHECK_THAT(graph_error({{{"kind", "split"}, {"axis", 1}, {"sizes", {0, 5}}}}, {5}), Catch::Contains("sizes"));
    CHECK_THAT(graph_error({{{"kind", "constant"}, {"name", "h"}, {"shape", {3}}, {"values", {0.5, 1, 2}}},
                            {{"kind", "unsqueeze"}, {"name", "hb"}, {"inputs", {"h"}}, {"axes", {0}}},
                            {{"kind", "concat"}, {"inputs", {"input", "hb"}}, {"axis", 1}}},
                           {3}, "int"),
               Catch::Contains("joins floats and integers; input 1 (hb) holds floats, input 0 integers"));
}

}  // namespace
}  // namespace psrun::nn::test
