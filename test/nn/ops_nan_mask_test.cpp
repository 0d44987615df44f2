// is_nan and is_inf (workerd/nn/ops/mask.cpp) on NaN, both infinities and finite values, each
// sign choice of is_inf; their export as IsNaN/IsInf read back. torch.nan_to_num, isnan and the
// And/Or/Xor lowerings against PyTorch: test/onnx/selection_models.py (model nan_masks).
#include <cmath>
#include <limits>

#include <catch2/catch.hpp>

#include "test/nn/ops_test_util.h"
#include "test/onnx/onnx_ops_test_util.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

ModelDescription flag_model(const json& layer) {
    json first = layer;
    first["name"] = "m";
    return graph_model({first, {{"kind", "cast"}, {"inputs", {"m"}}, {"to", "float"}}}, {5});
}

std::vector<float> flags(const ModelDescription& model, const std::vector<float>& x) {
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count)), grads;
    auto net = Network::create(model, NetworkOptions{1, Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    (*net)->forward(false);
    return {(*net)->outputs().begin(), (*net)->outputs().end()};
}

}  // namespace

TEST_CASE("is_nan and is_inf flag NaN and each infinity; they export and import back", "[eltwise][mask]") {
    const float inf = std::numeric_limits<float>::infinity();
    const std::vector<float> x = {std::numeric_limits<float>::quiet_NaN(), inf, -inf, 3.0f,
                                  -std::numeric_limits<float>::max()};
    CHECK(flags(flag_model({{"kind", "is_nan"}}), x) == std::vector<float>{1, 0, 0, 0, 0});
    CHECK(flags(flag_model({{"kind", "is_inf"}}), x) == std::vector<float>{0, 1, 1, 0, 0});
    CHECK(flags(flag_model({{"kind", "is_inf"}, {"negative", false}}), x) == std::vector<float>{0, 1, 0, 0, 0});
    CHECK(flags(flag_model({{"kind", "is_inf"}, {"positive", false}}), x) == std::vector<float>{0, 0, 1, 0, 0});
    for (const json& layer : {json{{"kind", "is_nan"}}, json{{"kind", "is_inf"}, {"positive", false}}}) {
        const auto model = flag_model(layer);
        std::vector<float> params;
        auto bytes = onnx_io::export_onnx(model, params);
        REQUIRE(bytes);
        onnx::ModelProto proto;
        REQUIRE(proto.ParseFromString(*bytes));
        proto.clear_metadata_props();  // the graph, not the embedded description
        auto back = onnx_io::import_onnx(proto.SerializeAsString(), "t.onnx");
        INFO((back ? std::string() : back.error().message));
        REQUIRE(back);
        CHECK(flags(*back, x) == flags(model, x));
    }
}

}  // namespace psrun::nn::test
