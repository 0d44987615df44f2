// group_norm through ONNX in process (workerd/onnx/): psrun's export at opset 13, valid to
// ONNX's checker
// (InstanceNormalization for groups = C, else PyTorch's Reshape/InstanceNormalization/Reshape/
// Mul/Add) read back without its embedded description, so that the importer reads the graph:
// one group_norm per layer with the same fields and tensor names, computing the same logits, with
// scale and bias away from ones and zeros.
#include <catch2/catch.hpp>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "test/nn/engine_test_util.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"  // before ONNX's checker: the defines its headers need

#include <onnx/checker.h>

namespace psrun::nn::test {
namespace {

using nlohmann::json;

// Logits of `model` with `params` on `x` (batch `batch`, forward only).
std::vector<float> logits(const ModelDescription& model, const std::vector<float>& params, const std::vector<float>& x,
                          std::int64_t batch) {
    NetworkOptions options;
    options.batch_size = batch;
    options.forward_only = true;
    auto net = Network::create(model, options, params, {});
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    REQUIRE((*net)->input().size() == x.size());
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    (*net)->forward(false);
    return {(*net)->outputs().begin(), (*net)->outputs().end()};
}

}  // namespace

TEST_CASE("group_norm exports as PyTorch writes it and imports back from the graph",
          "[nn_ops_norm][group_norm][onnx]") {
    const json doc{
        {"name", "gn_onnx"},
        {"input", {{"channels", 2}, {"height", 6}, {"width", 5}}},
        {"classes", 3},
        {"layers",
         json::array({{{"kind", "conv2d"}, {"name", "c1"}, {"filters", 8}, {"kernel", 3}, {"padding", "same"}},
                      {{"kind", "group_norm"}, {"name", "gn1"}, {"groups", 4}},
                      {{"kind", "tanh"}},
                      {{"kind", "group_norm"}, {"name", "gn2"}, {"groups", 2}, {"scale", false}},
                      {{"kind", "group_norm"}, {"name", "gn3"}, {"groups", 2}, {"center", false}},
                      {{"kind", "group_norm"}, {"name", "gn4"}, {"groups", 4}, {"affine", "group"}},
                      {{"kind", "group_norm"}, {"name", "in5"}, {"groups", 8}, {"epsilon", 1e-3}},
                      {{"kind", "dense"}, {"name", "d1"}, {"units", 3}}})},
        {"loss", {{"kind", "softmax_cross_entropy"}}}};
    auto model = parse_model(doc, "gn_onnx");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    std::vector<float> params(static_cast<std::size_t>(model->parameter_count));
    initialize_parameters(*model, 3, params);
    const auto noise = random_vector(params.size(), 4, 0.5);
    for (const auto& t : model->tensors) {
        if (t.name.rfind("gn", 0) != 0 && t.name.rfind("in", 0) != 0) continue;
        for (std::int64_t i = t.offset; i < t.offset + t.size; ++i)
            params[static_cast<std::size_t>(i)] += noise[static_cast<std::size_t>(i)];
    }
    auto bytes = onnx_io::export_onnx(*model, params);
    INFO((bytes ? std::string() : bytes.error().message));
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    // ONNX's own checker (libonnx, as onnx.checker.check_model).
    try {
        onnx::checker::check_model(proto);
    } catch (const std::exception& e) {
        FAIL("onnx checker: " << e.what());
    }
    int instance_norms = 0;
    for (const auto& n : proto.graph().node()) instance_norms += n.op_type() == "InstanceNormalization";
    CHECK(instance_norms == 5);
    proto.clear_metadata_props();  // no embedded description: the importer reads the graph
    std::string graph_only;
    REQUIRE(proto.SerializeToString(&graph_only));
    auto back = onnx_io::import_onnx(graph_only, "gn_onnx.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    // One group_norm per layer, with its fields (the dense layer after the image comes back as
    // transpose, flatten, dense: the exporter's layout for it).
    std::vector<json> norms, want_norms;
    for (const auto& n : back->nodes)
        if (n.op == "group_norm") norms.push_back(n.attrs);
    for (const auto& n : model->nodes)
        if (n.op == "group_norm") want_norms.push_back(n.attrs);
    CHECK(json(norms) == json(want_norms));
    for (const auto& t : model->tensors) {
        CAPTURE(t.name);
        const TensorDef* b = back->tensor(t.name);
        REQUIRE(b != nullptr);
        CHECK(b->shape == t.shape);
    }
    REQUIRE(back->initial_parameters);
    const std::int64_t batch = 3;
    const auto x = random_vector(static_cast<std::size_t>(batch * 2 * 6 * 5), 5, 2.0);
    const auto want = logits(*model, params, x, batch);
    const auto got = logits(*back, *back->initial_parameters, x, batch);
    CHECK(rel_l2(got, want) < 1e-5);
}

}  // namespace psrun::nn::test
