// softmax and log_softmax over an axis (workerd/nn/ops/softmax.cpp): forward against a naive
// loop on odd shapes and axes, mid-graph (attention-style, followed by a product), gradients
// against central differences, bf16 against f32, and the axis errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

// softmax (or log_softmax) of `x` (dims `dims`, row-major) along `axis` (non-negative).
std::vector<double> reference(const std::vector<float>& x, const std::vector<std::int64_t>& dims, std::size_t axis,
                              bool log) {
    const auto strides = strides_of(dims);
    std::vector<double> out(x.size());
    for (std::int64_t e = 0; e < count_of(dims); ++e) {
        const auto c = coords_of(e, dims);
        const std::int64_t base = e - c[axis] * strides[axis];
        double mx = -1e30, sum = 0;
        for (std::int64_t k = 0; k < dims[axis]; ++k) mx = std::max(mx, double{x[base + k * strides[axis]]});
        for (std::int64_t k = 0; k < dims[axis]; ++k) sum += std::exp(x[base + k * strides[axis]] - mx);
        out[e] = log ? x[e] - mx - std::log(sum) : std::exp(x[e] - mx) / sum;
    }
    return out;
}

TEST_CASE("softmax and log_softmax along any non-batch axis, against a naive loop", "[nn_engine][ops][softmax]") {
    const std::string op = GENERATE("softmax", "log_softmax");
    const std::int64_t axis = GENERATE(-1, 1, -2, 3);
    const int batch = GENERATE(1, 3);
    INFO(op << " axis " << axis << " batch " << batch);
    const std::vector<std::int64_t> shape = {3, 5, 7};
    const auto model = graph_model({{{"kind", op}, {"name", "out"}, {"axis", axis}}}, shape);
    const auto r = forward_of(model, batch, 3);
    const std::vector<std::int64_t> dims = {batch, 3, 5, 7};
    check_close(r.output,
                reference(r.input, dims, static_cast<std::size_t>(axis < 0 ? axis + 4 : axis), op == "log_softmax"));
    check_gradients(model, batch, 5);
    check_bf16_against_f32(model, batch, 7);
}

TEST_CASE("softmax mid-graph: scores of a dense layer, normalised, times the values", "[nn_engine][ops][softmax]") {
    // x: N x 4 x 6; s = softmax(dense(x)) along the last axis; out = s * x (the gradient reaches
    // x both through the softmax and directly).
    const json layers = {{{"kind", "dense"}, {"name", "scores"}, {"units", 6}},
                         {{"kind", "softmax"}, {"name", "p"}},
                         {{"kind", "mul"}, {"name", "out"}, {"inputs", {"p", "input"}}}};
    const auto model = graph_model(layers, {4, 6});
    for (const auto& n : model.nodes)
        if (n.name == "p") CHECK(n.attrs == json{{"axis", -1}});
    check_gradients(model, 3, 9);
    check_bf16_against_f32(model, 2, 11);
}

TEST_CASE("softmax: the batch axis, an axis out of range, integer inputs", "[nn_engine][ops][softmax]") {
    CHECK_THAT(graph_error({{{"kind", "softmax"}, {"axis", 0}}}, {3, 4}),
               Catch::Contains("layer 0 (softmax): axis 0 of N x 3 x 4 is the batch dim"));
    CHECK_THAT(graph_error({{{"kind", "log_softmax"}, {"axis", 3}}}, {3, 4}), Catch::Contains("axis 3 for rank 3"));
    CHECK_THAT(graph_error({{{"kind", "softmax"}}}, {3}, "int"), Catch::Contains("expects floats"));
}

}  // namespace
}  // namespace psrun::nn::test
