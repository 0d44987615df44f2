// cumsum (workerd/nn/ops/cumsum.cpp): every axis, exclusive and reverse, on floats against a
// naive loop, its gradient against central differences, bf16 against f32; on integer ids exact
// (sums past bf16's and f32's integers), integer add and mul after it (position ids from a
// mask, as Hugging Face computes them); and the errors.
#include <catch2/catch.hpp>

#include "test/nn/engine_test_util.h"
#include "test/nn/ops_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

// The reference on x [N, ...dims] (row-major), summing along `axis` (of the whole value).
std::vector<double> reference(const std::vector<float>& x, const std::vector<std::int64_t>& dims, std::int64_t axis,
                              bool exclusive, bool reverse) {
    std::int64_t outer = 1, len = dims[static_cast<std::size_t>(axis)], inner = 1;
    for (std::size_t d = 0; d < dims.size(); ++d) {
        if (static_cast<std::int64_t>(d) < axis) outer *= dims[d];
        if (static_cast<std::int64_t>(d) > axis) inner *= dims[d];
    }
    std::vector<double> y(x.size());
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t k = 0; k < inner; ++k)
            for (std::int64_t j = 0; j < len; ++j) {
                double s = 0;
                for (std::int64_t i = 0; i < len; ++i) {
                    const bool take = reverse ? (exclusive ? i > j : i >= j) : (exclusive ? i < j : i <= j);
                    if (take) s += x[static_cast<std::size_t>((o * len + i) * inner + k)];
                }
                y[static_cast<std::size_t>((o * len + j) * inner + k)] = s;
            }
    return y;
}

}  // namespace

TEST_CASE("cumsum on floats: every axis, exclusive and reverse, against a loop; gradients; bf16",
          "[nn_engine][ops][cumsum]") {
    const std::int64_t axis = GENERATE(1, 2, -1);
    const bool exclusive = GENERATE(false, true);
    const bool reverse = GENERATE(false, true);
    CAPTURE(axis, exclusive, reverse);
    const auto model = graph_model(
        {{{"kind", "cumsum"}, {"name", "c"}, {"axis", axis}, {"exclusive", exclusive}, {"reverse", reverse}},
         {{"kind", "flatten"}}},
        {3, 5});
    const std::int64_t batch = 2;
    const ForwardRun r = forward_of(model, batch, 7);
    const std::int64_t whole = axis < 0 ? axis + 3 : axis;
    check_close(r.output, reference(r.input, {batch, 3, 5}, whole, exclusive, reverse));
    check_gradients(model, batch, 8);
    check_bf16_against_f32(model, batch, 9);
}

TEST_CASE("cumsum on integer ids is exact; integer add and mul make position ids from a mask",
          "[nn_engine][ops][cumsum]") {
    // positions = cumsum(ids != 0) * (ids != 0) + 1, then a sum of 3 * 10^6 per id (past f32's
    // exact integers) to see that integer sums stay exact.
    const auto model = graph_model(
        {{{"kind", "constant"}, {"name", "zero"}, {"shape", json::array()}, {"type", "int"}, {"values", {0}}},
         {{"kind", "equal"}, {"name", "pad"}, {"inputs", {"input", "zero"}}},
         {{"kind", "not"}, {"name", "mask"}},
         {{"kind", "cumsum"}, {"name", "run"}, {"axis", 1}},
         {{"kind", "mul"}, {"name", "masked"}, {"inputs", {"run", "mask"}}},
         {{"kind", "constant"}, {"name", "one"}, {"shape", json::array()}, {"type", "int"}, {"values", {1}}},
         {{"kind", "add"}, {"name", "positions"}, {"inputs", {"masked", "one"}}},
         {{"kind", "constant"}, {"name", "big"}, {"shape", json::array()}, {"type", "int"}, {"values", {3000000}}},
         {{"kind", "mul"}, {"name", "scaled"}, {"inputs", {"input", "big"}}},
         {{"kind", "cumsum"}, {"name", "total"}, {"axis", -1}, {"reverse", true}},
         {{"kind", "sub"}, {"name", "back"}, {"inputs", {"total", "positions"}}},
         {{"kind", "cast"}, {"name", "out"}, {"inputs", {"back"}}, {"to", "float"}}},
        {6}, "int");
    const std::vector<std::int32_t> ids = {5, 7, 0, 9, 0, 0, 1, 1, 1, 1, 1, 1};
    std::vector<float> params, grads;
    auto net = Network::create(model, NetworkOptions{2, Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    (*net)->forward(false);
    std::vector<double> want;
    for (int n = 0; n < 2; ++n) {
        std::int64_t run = 0;
        for (int j = 0; j < 6; ++j) {
            const std::int32_t id = ids[static_cast<std::size_t>(n * 6 + j)];
            run += id != 0;
            std::int64_t total = 0;
            for (int i = j; i < 6; ++i) total += 3000000LL * ids[static_cast<std::size_t>(n * 6 + i)];
            want.push_back(static_cast<double>(total - ((id != 0 ? run : 0) + 1)));
        }
    }
    const std::vector<float> got((*net)->outputs().begin(), (*net)->outputs().end());
    REQUIRE(got.size() == want.size());
    // The output is float: exact where the value fits f32's integers; the sums themselves are
    // integers (3 * 10^6 * 22 = 6.6e7 is past 2^24; f32 rounds it by at most 4).
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(std::abs(got[i] - want[i]) <= 4.0);
    CHECK(got[6] == 17999998.0f);  // 18e6 - 2: even, so f32 holds it exactly
}

TEST_CASE("cumsum, integer arithmetic: errors name what is wrong", "[nn_engine][ops][cumsum]") {
    using Catch::Matchers::Contains;
    CHECK_THAT(graph_error({{{"kind", "cumsum"}, {"axis", 0}}}, {3}), Contains("is the batch axis"));
    CHECK_THAT(graph_error({{{"kind", "cumsum"}, {"axis", 3}}}, {3, 4}),
               Contains("axis 3 is outside the input's 3 dims"));
    CHECK_THAT(graph_error({{{"kind", "cumsum"}}}, {3}), Contains("field \"axis\""));
    CHECK_THAT(graph_error({{{"kind", "constant"}, {"name", "h"}, {"shape", {3}}, {"values", {0.5, 1, 2}}},
                            {{"kind", "add"}, {"inputs", {"input", "h"}}}},
                           {3}, "int"),
               Contains("holds integer ids"));
}

}  // namespace psrun::nn::test
