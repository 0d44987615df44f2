// slice and pad (workerd/nn/ops/slice_pad.cpp): forward against index arithmetic (negative and
// out-of-range starts and ends, steps, padding on several axes), gradients against central
// differences, bf16 against f32, and the errors.
#include <catch2/catch.hpp>

#include <limits>

#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

TEST_CASE("slice takes a strided block: negative and clamped bounds, steps", "[nn_engine][ops][slice]") {
    const int batch = GENERATE(1, 3);
    // x: N x 5 x 7. Axis 1: rows 1 and 3 (1:5:2); axis 2: -5 to 100 (columns 2..6), or 0:7:3.
    const bool stepped = GENERATE(false, true);
    INFO("batch " << batch << (stepped ? " step 3 on axis 2" : ""));
    const json layer = {{"kind", "slice"},
                        {"name", "out"},
                        {"axes", {1, -1}},
                        {"starts", {1, stepped ? 0 : -5}},
                        {"ends", {5, stepped ? 7 : 100}},
                        {"steps", {2, stepped ? 3 : 1}}};
    const auto model = graph_model({layer}, {5, 7});
    const std::vector<std::int64_t> od = {batch, 2, stepped ? 3 : 5};
    CHECK(concrete(model.value("out").dims, batch) == od);
    const auto r = forward_of(model, batch, 3);
    std::vector<double> expected;
    for (std::int64_t e = 0; e < count_of(od); ++e) {
        const auto c = coords_of(e, od);
        const std::int64_t row = 1 + 2 * c[1], col = stepped ? 3 * c[2] : 2 + c[2];
        expected.push_back(r.input[static_cast<std::size_t>((c[0] * 5 + row) * 7 + col)]);
    }
    check_close(r.output, expected);
    check_gradients(model, batch, 5);
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("pad surrounds a value with its constant on several axes", "[nn_engine][ops][pad]") {
    const int batch = GENERATE(1, 3);
    const double value = GENERATE(0.0, -1.5);
    INFO("batch " << batch << " value " << value);
    // x: N x 3 x 4, pads begins [0, 1, 2], ends [0, 0, 1]: N x 4 x 7; tanh after, so that the
    // gradient is not constant.
    json pad = {{"kind", "pad"}, {"name", "p"}, {"pads", {0, 1, 2, 0, 0, 1}}};
    if (value != 0.0) pad["value"] = value;
    const json layers = {pad, {{"kind", "tanh"}, {"name", "out"}}};
    const auto model = graph_model(layers, {3, 4});
    const std::vector<std::int64_t> od = {batch, 4, 7};
    CHECK(concrete(model.value("p").dims, batch) == od);
    const auto r = forward_of(model, batch, 9);
    std::vector<double> expected;
    for (std::int64_t e = 0; e < count_of(od); ++e) {
        const auto c = coords_of(e, od);
        const std::int64_t row = c[1] - 1, col = c[2] - 2;
        const bool inside = row >= 0 && row < 3 && col >= 0 && col < 4;
        expected.push_back(std::tanh(inside ? r.input[static_cast<std::size_t>((c[0] * 3 + row) * 4 + col)] : value));
    }
    check_close(r.output, expected);
    check_gradients(model, batch, 11);
    check_bf16_against_f32(model, batch, 13);
}

TEST_CASE("slice and pad: the batch axis, empty and repeated slices, steps, pad counts",
          "[nn_engine][ops][slice][pad]") {
    auto slice = [](json axes, json starts, json ends, json steps) {
        return json{{{"kind", "slice"}, {"axes", axes}, {"starts", starts}, {"ends", ends}, {"steps", steps}}};
    };
    CHECK_THAT(graph_error(slice({0}, {0}, {1}, {1}), {5}),
               Catch::Contains("layer 0 (slice): axis 0 is the batch dim"));
    CHECK_THAT(graph_error(slice({1}, {4}, {2}, {1}), {5}), Catch::Contains("axis 1 of N x 5 from 4 to 2 is empty"));
    CHECK_THAT(graph_error(slice({1, -1}, {0, 0}, {2, 2}, {1, 1}), {5}), Catch::Contains("axis -1 is given twice"));
    CHECK_THAT(graph_error(slice({1}, {0}, {2}, {-1}), {5}), Catch::Contains("steps"));
    CHECK_THAT(graph_error(slice({1}, {0, 1}, {2}, {1}), {5}), Catch::Contains("starts"));
    // A step as large as int64 allows takes the start alone (no overflow).
    const auto huge = graph_model(slice({1}, {1}, {5}, {std::numeric_limits<std::int64_t>::max()}), {5});
    CHECK(huge.value(huge.output).dims == Dims{Dim::batch_times(1), Dim::of(1)});
    CHECK_THAT(graph_error({{{"kind", "pad"}, {"pads", {0, 1}}}}, {3, 4}),
               Catch::Contains("layer 0 (pad): 2 pads for N x 3 x 4; give 6"));
    CHECK_THAT(graph_error({{{"kind", "pad"}, {"pads", {1, 0, 0, 0}}}}, {3}), Catch::Contains("dim 0 is the batch"));
    CHECK_THAT(graph_error({{{"kind", "pad"}, {"pads", {0, -1, 0, 0}}}}, {3}), Catch::Contains("pads"));
    CHECK_THAT(graph_error({{{"kind", "pad"}, {"pads", {0, 1, 0, 0}}, {"value", 1e39}}}, {3}),
               Catch::Contains("value must be a finite float"));
}

}  // namespace
}  // namespace psrun::nn::test
