// top_k (workerd/nn/ops/top_k.cpp) against a sort of each row: every axis, largest and
// smallest, its indices, ties (the lower index first) and NaN (the largest); its gradient by
// central differences and bf16 against f32; export as TopK and import back; integer div, mod
// and fmod (ops/binary.cpp) against C++'s arithmetic, negative operands and a zero divisor
// included; and the errors. PyTorch's own torch.topk, argmax and `%` are the reference in
// test/onnx/selection_models.py.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include <catch2/catch.hpp>

#include "test/nn/ops_test_util.h"
#include "test/onnx/onnx_ops_test_util.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

// The network's float output for `input` (batch 2), forward only.
std::vector<float> outputs_for(const ModelDescription& model, const std::vector<float>& input) {
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count)), grads;
    auto net = Network::create(model, NetworkOptions{2, Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    REQUIRE(input.size() == (*net)->input().size());
    std::copy(input.begin(), input.end(), (*net)->input().begin());
    (*net)->forward(false);
    return {(*net)->outputs().begin(), (*net)->outputs().end()};
}

// top_k on x [N, 3, 5] along `axis`, then its values (or its indices, cast) flattened.
json top_k_layers(std::int64_t axis, std::int64_t k, bool largest, bool indices) {
    json layers = {{{"kind", "top_k"}, {"name", "t"}, {"axis", axis}, {"k", k}, {"largest", largest}}};
    if (indices) layers.push_back({{"kind", "cast"}, {"inputs", {"t:1"}}, {"to", "float"}});
    layers.push_back({{"kind", "flatten"}});
    return layers;
}

ModelDescription top_k_model(std::int64_t axis, std::int64_t k, bool largest, bool indices) {
    return graph_model(top_k_layers(axis, k, largest, indices), {3, 5});
}

// The reference: values (or indices) of each row of x [2, 3, 5] along `axis`, stably ordered.
std::vector<double> reference(const std::vector<float>& x, std::int64_t axis, std::int64_t k, bool largest,
                              bool indices) {
    const std::vector<std::int64_t> dims = {2, 3, 5};
    std::int64_t outer = 1, inner = 1;
    const std::int64_t len = dims[static_cast<std::size_t>(axis)];
    for (std::int64_t d = 0; d < axis; ++d) outer *= dims[static_cast<std::size_t>(d)];
    for (std::int64_t d = axis + 1; d < 3; ++d) inner *= dims[static_cast<std::size_t>(d)];
    std::vector<double> out(static_cast<std::size_t>(outer * k * inner));
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t c = 0; c < inner; ++c) {
            std::vector<std::int64_t> order(static_cast<std::size_t>(len));
            std::iota(order.begin(), order.end(), 0);
            auto at = [&](std::int64_t j) { return x[static_cast<std::size_t>((o * len + j) * inner + c)]; };
            std::stable_sort(order.begin(), order.end(),
                             [&](std::int64_t a, std::int64_t b) { return largest ? at(a) > at(b) : at(a) < at(b); });
            for (std::int64_t j = 0; j < k; ++j)
                out[static_cast<std::size_t>((o * k + j) * inner + c)] =
                    indices ? static_cast<double>(order[static_cast<std::size_t>(j)])
                            : at(order[static_cast<std::size_t>(j)]);
        }
    return out;
}

}  // namespace

TEST_CASE("top_k: values and indices against a sort on every axis; gradients; bf16", "[eltwise][top_k]") {
    const std::int64_t axis = GENERATE(1, 2, -1);
    const bool largest = GENERATE(true, false);
    const std::int64_t whole = axis < 0 ? axis + 3 : axis;
    const std::int64_t k = whole == 1 ? 2 : 5;  // all of a row (a sort) on the last axis
    CAPTURE(axis, largest);
    const auto values = top_k_model(axis, k, largest, false);
    const ForwardRun r = forward_of(values, 2, 7);
    check_close(r.output, reference(r.input, whole, k, largest, false));
    check_close(outputs_for(top_k_model(axis, k, largest, true), r.input), reference(r.input, whole, k, largest, true),
                0);
    // A coordinate within the step (1e-2) of another in its row changes the selection between the
    // two evaluations of a central difference: allow two such kinks of 24.
    check_gradients(values, 2, 8, 24, 2e-2, /*outliers=*/2);
    check_bf16_against_f32(values, 2, 9);
}

TEST_CASE("top_k: ties go to the lower index, NaN is the largest", "[eltwise][top_k]") {
    const float nan = std::numeric_limits<float>::quiet_NaN();
    // Rows along axis 2 of [2, 3, 5]: ties, a NaN, equal values everywhere.
    const std::vector<float> x = {1,  3,  3,  0,  3,  2, nan, 5, 5, 1, 4, 4,   4, 4,   4,
                                  -1, -2, -1, -2, -3, 0, 0,   1, 1, 0, 7, nan, 7, nan, 6};
    const auto idx = outputs_for(top_k_model(2, 3, true, true), x);
    const std::vector<float> want = {1, 2, 4, 1, 2, 3, 0, 1, 2, 0, 2, 1, 2, 3, 0, 1, 3, 0};
    CHECK(idx == want);
    const auto low = outputs_for(top_k_model(2, 2, false, true), x);
    const std::vector<float> want_low = {3, 0, 4, 0, 0, 1, 4, 1, 0, 1, 4, 0};
    CHECK(low == want_low);
}

TEST_CASE("top_k exports as TopK and imports back", "[eltwise][top_k][onnx]") {
    onnx_io::test::check_round_trip(top_k_layers(-1, 3, false, false), {3, 5});
}

TEST_CASE("integer div, mod and fmod are C++'s and Python's, a zero divisor included", "[eltwise][mod]") {
    // ids [N, 6] against the divisors {7, -7, 3, -3, 0, 1}.
    const std::vector<std::int32_t> divisors = {7, -7, 3, -3, 0, 1};
    const std::vector<std::int32_t> ids = {20, -20, -8, 8, 5, -2147483647, -1, 13, 0, -9, -5, 6};
    for (const char* op : {"div", "mod", "fmod"}) {
        CAPTURE(op);
        const auto model =
            graph_model({{{"kind", "constant"}, {"name", "d"}, {"shape", {6}}, {"type", "int"}, {"values", divisors}},
                         {{"kind", op}, {"name", "r"}, {"inputs", {"input", "d"}}},
                         {{"kind", "cast"}, {"inputs", {"r"}}, {"to", "float"}}},
                        {6}, "int");
        std::vector<float> params, grads;
        auto net = Network::create(model, NetworkOptions{2, Precision::kF32, true}, params, grads);
        INFO((net ? std::string() : net.error().message));
        REQUIRE(net);
        std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
        (*net)->forward(false);
        const std::vector<float> got((*net)->outputs().begin(), (*net)->outputs().end());
        REQUIRE(got.size() == ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const std::int64_t a = ids[i], b = divisors[i % 6];
            std::int64_t want = 0;
            if (std::string(op) == "div") want = b == 0 ? 0 : a / b;
            else if (b == 0) want = a;
            else if (std::string(op) == "fmod") want = a % b;
            else want = a - b * static_cast<std::int64_t>(std::floor(static_cast<double>(a) / static_cast<double>(b)));
            CAPTURE(a, b);
            CHECK(got[i] == static_cast<float>(want));
        }
    }
}

TEST_CASE("integer maximum, minimum and where select ids exactly, beyond float's 2^24", "[eltwise][select]") {
    // ids [N, 4] against the bound {0, 16777217, -3, 5} (broadcast over the batch).
    const std::vector<std::int32_t> bound = {0, 16777217, -3, 5};
    const std::vector<std::int32_t> ids = {-4, 16777219, -2, 5, 9, 16777216, -7, 2147483647};
    for (const char* op : {"maximum", "minimum", "where"}) {
        CAPTURE(op);
        nlohmann::json inputs = {"input", "b"};
        if (std::string(op) == "where") inputs = {"m", "input", "b"};  // ids where ids > bound, else the bound
        const auto model = graph_model(
            {{{"kind", "constant"}, {"name", "b"}, {"shape", {4}}, {"type", "int"}, {"values", bound}},
             {{"kind", "greater"}, {"name", "m"}, {"inputs", {"input", "b"}}},
             {{"kind", op}, {"name", "r"}, {"inputs", inputs}},
             {{"kind", "sub"}, {"name", "d"}, {"inputs", {"r", "b"}}},  // exact in int; small enough for a float
             {{"kind", "cast"}, {"inputs", {"d"}}, {"to", "float"}}},
            {4}, "int");
        std::vector<float> params, grads;
        auto net = Network::create(model, NetworkOptions{2, Precision::kF32, true}, params, grads);
        INFO((net ? std::string() : net.error().message));
        REQUIRE(net);
        CHECK(model.value("r").type == ElementType::kInt);
        std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
        (*net)->forward(false);
        const std::vector<float> got((*net)->outputs().begin(), (*net)->outputs().end());
        REQUIRE(got.size() == ids.size());
        for (std::size_t i = 0; i < ids.size(); ++i) {
            const std::int64_t a = ids[i], b = bound[i % 4];
            const std::int64_t pick = std::string(op) == "minimum" ? std::min(a, b) : std::max(a, b);
            CAPTURE(a, b);
            CHECK(got[i] == static_cast<float>(pick - b));
        }
    }
}

TEST_CASE("top_k of integer ids sorts them exactly, values as ids", "[eltwise][top_k]") {
    // torch's `h.topk(k).indices.sort()`: ids beyond float's 2^24 keep their order and value.
    const std::vector<std::int64_t> ids = {16777217, 3, 16777216, -5, 3, 7, 0, -7, 2, 2};
    const bool largest = GENERATE(true, false);
    CAPTURE(largest);
    auto model =
        graph_model({{{"kind", "top_k"}, {"name", "t"}, {"axis", 1}, {"k", 4}, {"largest", largest}},
                     {{"kind", "constant"}, {"name", "b"}, {"shape", {1}}, {"type", "int"}, {"values", {8388608}}},
                     {{"kind", "sub"}, {"name", "d"}, {"inputs", {"t", "b"}}},
                     {{"kind", "concat"}, {"inputs", {"t:1", "d"}}, {"axis", 1}},
                     {{"kind", "cast"}, {"to", "float"}}},
                    {5}, "int");
    std::vector<float> params, grads;
    auto net = Network::create(model, NetworkOptions{2, Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    CHECK(model.value("t").type == ElementType::kInt);
    std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    (*net)->forward(false);
    const std::vector<float> got((*net)->outputs().begin(), (*net)->outputs().end());
    // Each row's 4 indices by value (ties: the lower index first), then the values less 2^23
    // (exact in a float once the difference is below 2^24).
    const std::vector<float> want = largest ? std::vector<float>{0, 2, 1, 4, 8388609,  8388608,  -8388605, -8388605,
                                                                 0, 3, 4, 1, -8388601, -8388606, -8388606, -8388608}
                                            : std::vector<float>{3, 1, 4, 2, -8388613, -8388605, -8388605, 8388608,
                                                                 2, 1, 3, 4, -8388615, -8388608, -8388606, -8388606};
    CHECK(got == want);
}

TEST_CASE("top_k, mod: errors name what is wrong", "[eltwise][top_k][mod]") {
    using Catch::Matchers::Contains;
    CHECK_THAT(graph_error({{{"kind", "top_k"}, {"axis", 0}, {"k", 1}}}, {3}), Contains("is the batch axis"));
    CHECK_THAT(graph_error({{{"kind", "top_k"}, {"axis", 1}, {"k", 4}}}, {3}), Contains("k must be at most 3"));
    CHECK_THAT(graph_error({{{"kind", "top_k"}, {"axis", 1}}}, {3}), Contains("field \"k\""));
    CHECK_THAT(graph_error({{{"kind", "mod"}, {"inputs", {"input", "input"}}}}, {3}), Contains("two integer inputs"));
}

}  // namespace psrun::nn::test
