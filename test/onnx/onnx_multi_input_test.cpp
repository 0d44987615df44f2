// Several inputs through ONNX (issue 34): a two-input description exports every input under its
// name, in order; it imports back to the same architecture (with the embedded description) and,
// from the graph alone, to a model with the same inputs computing the same outputs.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include "workerd/nn/model_summary.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;
using nlohmann::json;

namespace {

// An image x [N, 1, 6, 6] and a metadata vector meta [N, 3]: conv, flatten, concat with
// dense(meta), dense 4.
nn::ModelDescription image_and_meta() {
    const json doc = {
        {"inputs", {{{"name", "x"}, {"channels", 1}, {"height", 6}, {"width", 6}}, {{"name", "meta"}, {"dims", {3}}}}},
        {"classes", 4},
        {"layers",
         {{{"kind", "conv2d"}, {"name", "conv"}, {"inputs", {"x"}}, {"filters", 2}, {"kernel", 3}},
          {{"kind", "relu"}},
          {{"kind", "flatten"}, {"name", "flat"}},
          {{"kind", "dense"}, {"name", "meta_fc"}, {"inputs", {"meta"}}, {"units", 5}},
          {{"kind", "concat"}, {"name", "joined"}, {"inputs", {"flat", "meta_fc"}}, {"axis", 1}},
          {{"kind", "dense"}, {"name", "logits"}, {"units", 4}}}}};
    auto model = nn::parse_model(doc, "two");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

std::vector<float> outputs(const nn::ModelDescription& model, const std::vector<float>& params) {
    std::vector<float> grads;
    auto net = nn::Network::create(model, nn::NetworkOptions{3, nn::Precision::kF32, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    for (std::size_t i = 0; i < model.inputs.size(); ++i) {
        auto x = (*net)->input(i);
        for (std::size_t k = 0; k < x.size(); ++k) x[k] = static_cast<float>((k * (i + 3)) % 11) / 11.0f - 0.3f;
    }
    (*net)->forward(false);
    return {(*net)->outputs().begin(), (*net)->outputs().end()};
}

}  // namespace

TEST_CASE("a two-input model exports both inputs by name and imports back", "[onnx][multi_input]") {
    const auto model = image_and_meta();
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    nn::initialize_parameters(model, 5, params);
    auto bytes = onnx_io::export_onnx(model, params);
    INFO((bytes ? std::string() : bytes.error().message));
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    const auto& g = proto.graph();
    REQUIRE(g.input_size() == 2);
    CHECK(g.input(0).name() == "x");  // not renamed "images": the inputs are fed by name
    CHECK(g.input(1).name() == "meta");
    CHECK(g.input(1).type().tensor_type().shape().dim_size() == 2);
    CHECK(g.input(1).type().tensor_type().shape().dim(1).dim_value() == 3);

    auto back = onnx_io::import_onnx(*bytes, "two.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    CHECK(nn::architecture_hash(*back) == nn::architecture_hash(model));

    proto.clear_metadata_props();
    auto bare = onnx_io::import_onnx(proto.SerializeAsString(), "bare.onnx");
    INFO((bare ? std::string() : bare.error().message));
    REQUIRE(bare);
    REQUIRE(bare->inputs.size() == 2);
    CHECK(bare->inputs[0].name == "x");
    CHECK(bare->inputs[1].name == "meta");
    CHECK(nn::to_string(bare->inputs[1].info.dims) == nn::to_string(model.inputs[1].info.dims));
    REQUIRE(bare->initial_parameters);
    const auto want = outputs(model, params), got = outputs(*bare, *bare->initial_parameters);
    REQUIRE(want.size() == got.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(1e-5).margin(1e-6));
}

TEST_CASE("a graph input that no node reads is an error naming it", "[onnx][multi_input]") {
    const auto model = image_and_meta();
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    auto bytes = onnx_io::export_onnx(model, params);
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    proto.clear_metadata_props();
    auto* spare = proto.mutable_graph()->add_input();
    *spare = proto.graph().input(1);
    spare->set_name("spare");
    auto back = onnx_io::import_onnx(proto.SerializeAsString(), "spare.onnx");
    REQUIRE_FALSE(back);
    CHECK(back.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(back.error().message, Catch::Contains("input \"spare\" (inputs[2]) is read by no layer"));

    *proto.mutable_graph()->mutable_input(2) = proto.graph().input(1);  // "meta" twice
    auto twice = onnx_io::import_onnx(proto.SerializeAsString(), "twice.onnx");
    REQUIRE_FALSE(twice);
    CHECK_THAT(twice.error().message, Catch::Contains("two graph inputs are named 'meta'"));
}
