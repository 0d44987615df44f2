// ONNX export and import of the element-wise kinds of issue 34: a description using each kind
// exports (graph only: the embedded description removed) and imports back to the same outputs
// and, where the ONNX form maps one to one, the same kinds; a constant holding -inf survives.
#include <catch2/catch.hpp>

#include <limits>
#include <string>
#include <vector>

#include "test/nn/ops_test_util.h"
#include "test/onnx/onnx_ops_test_util.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

// Export, strip the embedded description (unless `keep_description`), import: the same outputs
// (and kinds when `same_kinds`).
void check_round_trip(const json& layers, const std::vector<std::int64_t>& shape, bool same_kinds,
                      bool keep_description = false) {
    const auto model = graph_model(layers, shape);
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    initialize_parameters(model, 5, params);
    auto bytes = onnx_io::export_onnx(model, params);
    INFO((bytes ? std::string() : bytes.error().message));
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    if (!keep_description) proto.clear_metadata_props();
    auto back = onnx_io::import_onnx(proto.SerializeAsString(), "t.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    if (same_kinds) CHECK(onnx_io::test::kinds(*back) == onnx_io::test::kinds(model));
    const auto a = onnx_io::test::outputs(model, params, 9),
               b = onnx_io::test::outputs(*back, *back->initial_parameters, 9);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("activations export at opset 13 and import back", "[eltwise][onnx]") {
    check_round_trip({{{"kind", "selu"}, {"name", "a"}},
                      {{"kind", "hard_sigmoid"}, {"name", "b"}, {"alpha", 0.2}},
                      {{"kind", "reciprocal"}, {"name", "c"}}},
                     {3, 4}, true);
    // HardSwish and Mish are opsets 14 and 18: HardSigmoid * x and x * Tanh(Softplus(x)).
    check_round_trip({{{"kind", "hard_swish"}, {"name", "a"}}, {{"kind", "mish"}, {"name", "b"}}}, {3, 4}, false);
}

TEST_CASE("the hand math functions export as their ONNX ops and import back", "[eltwise][onnx]") {
    // A chain that keeps each function inside its domain: tanh in (-1, 1) for asin, cosh >= 1
    // for acosh, a tanh before atanh and acos.
    json layers = json::array();
    for (const char* kind : {"tanh", "asin", "atan", "tan", "sinh", "asinh", "cosh", "acosh", "tanh", "atanh", "tanh",
                             "acos", "round", "ceil", "floor", "erf"})
        layers.push_back({{"kind", kind}});
    layers.push_back({{"kind", "flatten"}, {"name", "f"}});
    check_round_trip(layers, {3, 4}, true);
}

TEST_CASE("prelu, maximum, minimum, reduce_max, reduce_min export and import back", "[eltwise][onnx]") {
    check_round_trip({{{"kind", "prelu"}, {"name", "a"}, {"shared", true}}}, {3, 4, 5}, true);
    check_round_trip({{{"kind", "prelu"}, {"name", "a"}}}, {3, 4, 5}, false);  // [C] unsqueezed: a parameter
    check_round_trip({{{"kind", "prelu"}, {"name", "a"}}}, {6}, true);         // N x C: [C] as it is
    // A scalar parameter (weight_norm(dim=None)'s g) exports as a 0-D initializer and back.
    check_round_trip({{{"kind", "parameter"}, {"name", "g"}, {"shape", json::array()}},
                      {{"kind", "mul"}, {"name", "a"}, {"inputs", {"input", "g"}}}},
                     {3, 4}, true);
    check_round_trip({{{"kind", "parameter"}, {"name", "p"}, {"shape", {4}}},
                      {{"kind", "maximum"}, {"name", "a"}, {"inputs", {"input", "p"}}},
                      {{"kind", "minimum"}, {"name", "b"}, {"inputs", {"a", "input"}}},
                      {{"kind", "reduce_max"}, {"name", "c"}, {"axes", {2}}, {"keepdims", true}},
                      {{"kind", "reduce_min"}, {"name", "d"}, {"axes", {1}}, {"keepdims", false}}},
                     {3, 4}, true);
}

TEST_CASE("masks, where, cast and expand export and import back", "[eltwise][onnx]") {
    check_round_trip({{{"kind", "constant"}, {"name", "zero"}, {"shape", json::array()}, {"values", {0.0}}},
                      {{"kind", "greater"}, {"name", "m"}, {"inputs", {"input", "zero"}}},
                      {{"kind", "not"}, {"name", "n"}},
                      {{"kind", "tanh"}, {"name", "t"}, {"inputs", {"input"}}},
                      {{"kind", "where"}, {"name", "w"}, {"inputs", {"n", "t", "input"}}},
                      {{"kind", "cast"}, {"name", "f"}, {"inputs", {"m"}}, {"to", "float"}},
                      {{"kind", "add"}, {"name", "out"}, {"inputs", {"w", "f"}}}},
                     {3, 4}, true);
    check_round_trip({{{"kind", "parameter"}, {"name", "cls"}, {"shape", {1, 1, 4}}},
                      {{"kind", "expand"}, {"name", "e"}, {"shape", {"N", 1, 1}}},
                      {{"kind", "concat"}, {"name", "out"}, {"inputs", {"e", "input"}}, {"axis", 1}}},
                     {3, 4}, true);
    // Integer running sums and products (position ids from a mask) and a float cumsum, exclusive and
    // reversed: CumSum on int64 and float, integer Mul, a Cast.
    check_round_trip({{{"kind", "constant"}, {"name", "zero"}, {"shape", json::array()}, {"values", {0.0}}},
                      {{"kind", "greater"}, {"name", "m"}, {"inputs", {"input", "zero"}}},
                      {{"kind", "cumsum"}, {"name", "c"}, {"inputs", {"m"}}, {"axis", -1}},
                      {{"kind", "mul"}, {"name", "p"}, {"inputs", {"c", "m"}}},
                      {{"kind", "cast"}, {"name", "f"}, {"inputs", {"p"}}, {"to", "float"}},
                      {{"kind", "cumsum"},
                       {"name", "r"},
                       {"inputs", {"input"}},
                       {"axis", 1},
                       {"exclusive", true},
                       {"reverse", true}},
                      {{"kind", "add"}, {"name", "out"}, {"inputs", {"f", "r"}}}},
                     {3, 4}, true);
    // The batch on a later axis (an LSTM's learned initial state [1, N, H]), back to the front.
    check_round_trip({{{"kind", "parameter"}, {"name", "h0"}, {"shape", {1, 1, 4}}},
                      {{"kind", "expand"}, {"name", "e"}, {"shape", {1, "N", 1}}},
                      {{"kind", "transpose"}, {"name", "t"}, {"perm", {1, 0, 2}}},
                      {{"kind", "concat"}, {"name", "out"}, {"inputs", {"t", "input"}}, {"axis", 1}}},
                     {3, 4}, true);
}

TEST_CASE("a -inf mask constant exports and imports back; softmax after it", "[eltwise][onnx]") {
    const double inf = std::numeric_limits<double>::infinity();
    // With the embedded description (JSON has no -inf: it fails to parse and the graph is read).
    const bool keep = GENERATE(false, true);
    CAPTURE(keep);
    check_round_trip(
        {{{"kind", "constant"}, {"name", "mask"}, {"shape", {3, 3}}, {"values", {0, -inf, -inf, 0, 0, -inf, 0, 0, 0}}},
         {{"kind", "add"}, {"name", "s"}, {"inputs", {"input", "mask"}}},
         {{"kind", "softmax"}, {"name", "p"}, {"axis", -1}},
         {{"kind", "mul"}, {"name", "out"}, {"inputs", {"p", "input"}}}},
        {3, 3}, true, keep);
}

}  // namespace
}  // namespace psrun::nn::test
