// grid_sample (workerd/nn/ops/grid_sample.cpp): every mode, padding and alignment with the input
// sampled at points read from the input itself, so that both gradients are checked by central
// differences (the bilinear grid gradient has kinks at pixel edges: a few coordinates may land
// across one), bf16 against f32, export and import back, and the shape errors. Torch's own
// F.grid_sample is the reference in test/onnx/grid_sample_models.py.
#include <catch2/catch.hpp>

#include "test/nn/ops_test_util.h"
#include "test/onnx/onnx_ops_test_util.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

// x = the input (N x 2 x 4 x 5); the grid = the input's values moved last ([N, 4, 5, 2]), scaled
// by 1.4 so that some points fall outside the image (the padding modes differ there).
json sampled(const std::string& mode, const std::string& padding, bool align) {
    return {{{"kind", "transpose"}, {"name", "t"}, {"inputs", {"input"}}, {"perm", {0, 2, 3, 1}}},
            {{"kind", "add"}, {"name", "g"}, {"inputs", {"t", "t"}}},
            {{"kind", "grid_sample"},
             {"name", "out"},
             {"inputs", {"input", "g"}},
             {"mode", mode},
             {"padding_mode", padding},
             {"align_corners", align}}};
}

TEST_CASE("grid_sample: gradients to the image and the grid, bf16, every mode", "[eltwise][grid_sample]") {
    const std::string mode = GENERATE("bilinear", "nearest");
    const std::string padding = GENERATE("zeros", "border", "reflection");
    const bool align = GENERATE(false, true);
    CAPTURE(mode, padding, align);
    const auto model = graph_model(sampled(mode, padding, align), {2, 4, 5});
    CHECK(concrete(model.value("out").dims, 3) == std::vector<std::int64_t>{3, 2, 4, 5});
    const auto r = forward_of(model, 3, 3);
    // Every output is a convex combination of the example's own channel (weights sum to at most 1).
    for (const float v : r.output) CHECK(std::fabs(v) <= 1.0f + 1e-6f);
    check_gradients(model, 3, 5, 24, 2e-2, /*outliers=*/3);
    check_bf16_against_f32(model, 3, 7, 5e-2);
}

TEST_CASE("grid_sample exports as GridSample (opset 16) and imports back", "[eltwise][grid_sample][onnx]") {
    const auto model = graph_model(sampled("bilinear", "reflection", true), {2, 4, 5});
    std::vector<float> params;
    auto bytes = onnx_io::export_onnx(model, params);
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    CHECK(proto.opset_import(0).version() == 16);
    CHECK(proto.ir_version() == 8);
    proto.clear_metadata_props();  // import the graph, not the embedded description
    auto back = onnx_io::import_onnx(proto.SerializeAsString(), "t.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    CHECK(onnx_io::test::kinds(*back) == onnx_io::test::kinds(model));
    const auto a = onnx_io::test::outputs(model, params, 9), b = onnx_io::test::outputs(*back, params, 9);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == a[i]);
}

TEST_CASE("grid_sample: the input's rank, the grid's shape and batch", "[eltwise][grid_sample]") {
    CHECK_THAT(graph_error({{{"kind", "transpose"}, {"name", "t"}, {"perm", {0, 2, 1}}},
                            {{"kind", "grid_sample"}, {"inputs", {"input", "t"}}}},
                           {4, 2}),
               Catch::Contains("N x C x H x W"));
    CHECK_THAT(graph_error({{{"kind", "grid_sample"}, {"inputs", {"input", "input"}}}}, {2, 4, 5}),
               Catch::Contains("N x OH x OW x 2"));
    CHECK_THAT(graph_error({{{"kind", "grid_sample"}, {"inputs", {"input", "input"}}, {"mode", "bicubic"}}}, {2, 4, 2}),
               Catch::Contains("mode"));
}

}  // namespace
}  // namespace psrun::nn::test
