// scatter_nd and gather_nd (workerd/nn/ops/scatter_nd.cpp) on index tuples built in the graph
// as torch.onnx builds them (batch_range, unsqueeze, an integer constant expanded over the
// batch, an integer concat): against loops, negative and out-of-range entries, the "add"
// reduction and batch_dims 1; gradients by central differences, bf16 against f32; export and
// import back.
// PyTorch's slice assignment, advanced indexing and torch.diagonal are the reference in
// test/onnx/selection_models.py.
#include <catch2/catch.hpp>

#include "test/nn/ops_test_util.h"
#include "test/onnx/onnx_ops_test_util.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

// Tuples (n, column) for each example n of an input [N, 3, 4]: column is `col` (negative:
// from the end; 3 or more: outside), as layers.
json tuple_layers(std::int64_t col) {
    return {{{"kind", "batch_range"}, {"name", "n"}},
            {{"kind", "unsqueeze"}, {"name", "n1"}, {"inputs", {"n"}}, {"axes", {1}}},
            {{"kind", "constant"}, {"name", "c"}, {"shape", {1, 1}}, {"type", "int"}, {"values", {col}}},
            {{"kind", "expand"}, {"name", "cn"}, {"inputs", {"c"}}, {"shape", {"N", 1}}},
            {{"kind", "concat"}, {"name", "t"}, {"inputs", {"n1", "cn"}}, {"axis", 1}}};
}

// x [N, 3, 4]: rows x[n, col] gathered ([N, 4]), tanh'd, written back ("none") or added
// ("add") at the same tuples, flattened.
ModelDescription round_trip_model(std::int64_t col, const char* reduction) {
    json layers = tuple_layers(col);
    layers.push_back({{"kind", "gather_nd"}, {"name", "g"}, {"inputs", {"input", "t"}}});
    layers.push_back({{"kind", "tanh"}, {"name", "u"}, {"inputs", {"g"}}});
    layers.push_back(
        {{"kind", "scatter_nd"}, {"name", "s"}, {"inputs", {"input", "t", "u"}}, {"reduction", reduction}});
    layers.push_back({{"kind", "flatten"}});
    return graph_model(layers, {3, 4});
}

}  // namespace

TEST_CASE("gather_nd and scatter_nd against loops; gradients; export and import", "[eltwise][scatter_nd]") {
    const std::int64_t col = GENERATE(1, -1, 3);
    const char* reduction = GENERATE("none", "add");
    CAPTURE(col, reduction);
    const auto model = round_trip_model(col, reduction);
    const ForwardRun r = forward_of(model, 2, 5);
    std::vector<double> want(r.input.begin(), r.input.end());
    const std::int64_t row = col < 0 ? col + 3 : col;
    if (row < 3)
        for (std::int64_t n = 0; n < 2; ++n)
            for (std::int64_t e = 0; e < 4; ++e) {
                const auto at = static_cast<std::size_t>((n * 3 + row) * 4 + e);
                const double u = std::tanh(static_cast<double>(r.input[at]));
                want[at] = std::string(reduction) == "add" ? want[at] + u : u;
            }
    check_close(r.output, want);
    check_gradients(model, 2, 6);
    check_bf16_against_f32(model, 2, 7);
    std::vector<float> params;
    auto bytes = onnx_io::export_onnx(model, params);
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    proto.clear_metadata_props();  // the graph, not the embedded description
    auto back = onnx_io::import_onnx(proto.SerializeAsString(), "t.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    const auto a = onnx_io::test::outputs(model, params, 9), b = onnx_io::test::outputs(*back, params, 9);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == a[i]);
}

TEST_CASE("gather_nd with batch_dims 1 reads each example's own rows", "[eltwise][scatter_nd]") {
    // x [N, 3, 4]; per example the tuples (2), (0), (-2): rows 2, 0, 1 of its own [3, 4].
    const auto model = graph_model(
        {{{"kind", "constant"}, {"name", "c"}, {"shape", {1, 3, 1}}, {"type", "int"}, {"values", {2, 0, -2}}},
         {{"kind", "expand"}, {"name", "t"}, {"inputs", {"c"}}, {"shape", {"N", 3, 1}}},
         {{"kind", "gather_nd"}, {"name", "g"}, {"inputs", {"input", "t"}}, {"batch_dims", 1}},
         {{"kind", "flatten"}}},
        {3, 4});
    const ForwardRun r = forward_of(model, 2, 3);
    std::vector<double> want;
    for (std::int64_t n = 0; n < 2; ++n)
        for (const std::int64_t row : {2, 0, 1})
            for (std::int64_t e = 0; e < 4; ++e)
                want.push_back(r.input[static_cast<std::size_t>((n * 3 + row) * 4 + e)]);
    check_close(r.output, want);
    check_gradients(model, 2, 4);
}

TEST_CASE("scatter_nd, gather_nd, batch_range: errors name what is wrong", "[eltwise][scatter_nd]") {
    using Catch::Matchers::Contains;
    json layers = tuple_layers(1);
    layers.push_back({{"kind", "gather_nd"}, {"inputs", {"t", "t"}}});
    CHECK_THAT(graph_error(layers, {3, 4}), Contains("expects float data"));
    layers = tuple_layers(1);
    layers.push_back({{"kind", "gather_nd"}, {"inputs", {"input", "input"}}});
    CHECK_THAT(graph_error(layers, {3, 4}), Contains("expects integer indices"));
    layers = tuple_layers(1);
    layers.push_back({{"kind", "scatter_nd"}, {"inputs", {"input", "t", "input"}}});
    CHECK_THAT(graph_error(layers, {3, 4}), Contains("indices and data make them N x 4"));
    CHECK_THAT(graph_error({{{"kind", "constant"},
                             {"name", "c"},
                             {"shape", {2, 5}},
                             {"type", "int"},
                             {"values", {0, 0, 0, 0, 0, 0, 0, 0, 0, 0}}},
                            {{"kind", "expand"}, {"name", "t"}, {"inputs", {"c"}}, {"shape", {"N", 2, 5}}},
                            {{"kind", "gather_nd"}, {"inputs", {"input", "t"}}}},
                           {3, 4}),
               Contains("must have 1 to 3 entries"));
}

}  // namespace psrun::nn::test
