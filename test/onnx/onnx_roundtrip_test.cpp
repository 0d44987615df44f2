// Export then import of every built-in model: the same architecture hash and the same
// parameters bit for bit, with and without the description the export embeds (without it the
// graph alone must compute the same outputs). And the training path:
// initialize_parameters starts from a model's initial_parameters when it has them.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cstring>
#include <set>
#include <string>
#include <vector>

#include "workerd/nn/model_summary.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/recipe.h"
#include "workerd/nn/zoo.h"
#include "workerd/onnx/model_loader.h"
#include "workerd/onnx/onnx_graph_digest.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;

namespace {

nn::ModelDescription builtin(std::string_view name) {
    auto model = nn::load_model(name);
    REQUIRE(model);
    return *model;
}

std::vector<float> drawn(const nn::ModelDescription& model, std::uint64_t seed) {
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    nn::initialize_parameters(model, seed, params);
    return params;
}

// The built-ins and test/onnx/models/odd_shapes.json (what the zoo does not use: no bias, strided
// asymmetric same padding, padded avg_pool, sigmoid, dense on a non-square image); the tests
// run in the source root.
std::vector<std::string> model_specs() {
    std::vector<std::string> specs;
    for (const auto& b : nn::builtin_models()) specs.emplace_back(b.name);
    specs.emplace_back("test/onnx/models/odd_shapes.json");
    return specs;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("every built-in model (and odd_shapes.json) survives export and import: hash and parameters bit for bit",
          "[onnx]") {
    for (const auto& spec : model_specs()) {
        INFO(spec);
        const auto model = builtin(spec);
        const auto params = drawn(model, 7);
        auto bytes = onnx_io::export_onnx(model, params);
        REQUIRE(bytes);
        auto back = onnx_io::import_onnx(*bytes, "x.onnx");
        INFO((back ? std::string() : back.error().message));
        REQUIRE(back);
        CHECK(nn::architecture_hash(*back) == nn::architecture_hash(model));
        CHECK(nn::model_json(*back) == nn::model_json(model));
        REQUIRE(back->initial_parameters);
        CHECK(same_bits(*back->initial_parameters, params));
    }
}

TEST_CASE("without the embedded description the graph alone gives the layers and the parameters", "[onnx]") {
    for (const auto& spec : model_specs()) {
        INFO(spec);
        const auto model = builtin(spec);
        const auto params = drawn(model, 3);
        auto bytes = onnx_io::export_onnx(model, params);
        REQUIRE(bytes);
        onnx::ModelProto proto;
        REQUIRE(proto.ParseFromString(*bytes));
        REQUIRE(proto.metadata_props_size() == 2);
        CHECK(proto.metadata_props(0).key() == onnx_io::kDescriptionKey);
        CHECK(proto.metadata_props(1).key() == onnx_io::kGraphDigestKey);
        proto.clear_metadata_props();
        auto back = onnx_io::import_onnx(proto.SerializeAsString(), "bare.onnx");
        INFO((back ? std::string() : back.error().message));
        REQUIRE(back);
        // The graph alone computes what the model does (dropout, an identity at inference, aside).
        std::vector<float> grads;
        auto a = nn::Network::create(model, nn::NetworkOptions{3, nn::Precision::kF32, true}, params, grads);
        auto b = nn::Network::create(*back, nn::NetworkOptions{3, nn::Precision::kF32, true}, *back->initial_parameters,
                                     grads);
        INFO((b ? std::string() : b.error().message));
        REQUIRE(a);
        REQUIRE(b);
        for (std::size_t i = 0; i < (*a)->input().size(); ++i)
            (*a)->input()[i] = (*b)->input()[i] = static_cast<float>(i % 17) / 17.0f;
        (*a)->forward(false);
        (*b)->forward(false);
        const auto ya = (*a)->outputs(), yb = (*b)->outputs();
        REQUIRE(ya.size() == yb.size());
        for (std::size_t i = 0; i < ya.size(); ++i) CHECK(yb[i] == Approx(ya[i]).epsilon(1e-4).margin(1e-5));
        CHECK(back->parameter_count == model.parameter_count);
        REQUIRE(back->initial_parameters);
        CHECK(same_bits(*back->initial_parameters, params));
    }
}

TEST_CASE("the exported graph names its input, output, nodes and initializers after the layers", "[onnx]") {
    const auto model = builtin("mnist_deep");
    auto bytes = onnx_io::export_onnx(model, drawn(model, 1));
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    CHECK(proto.opset_import(0).version() == 13);
    const auto& g = proto.graph();
    CHECK(g.input(0).name() == "images");
    CHECK(g.input(0).type().tensor_type().shape().dim(0).dim_param() == "N");
    CHECK(g.output(0).name() == "probabilities");
    std::vector<std::string> ops, names;
    for (const auto& n : g.node()) {
        ops.push_back(n.op_type());
        names.push_back(n.name());
    }
    // fc1 flattens in TF's NHWC order: a Transpose to NHWC before ONNX's Flatten; dropout is
    // the identity at inference.
    CHECK(ops == std::vector<std::string>{"Conv", "Relu", "MaxPool", "Conv", "Relu", "MaxPool", "Transpose", "Flatten",
                                          "Gemm", "Relu", "Identity", "Gemm", "Softmax"});
    CHECK(names.front() == "conv1");
    CHECK(g.initializer(0).name() == "conv1/w");
    CHECK(onnx_io::export_onnx(model, std::vector<float>(10)).error().code == ErrorCode::kInvalidArgument);
}

TEST_CASE("initialize_parameters copies a model's initial_parameters, size-checked", "[onnx]") {
    auto model = builtin("mnist_softmax");
    const auto fresh = drawn(model, 5);
    std::vector<float> initial(static_cast<std::size_t>(model.parameter_count));
    for (std::size_t i = 0; i < initial.size(); ++i) initial[i] = static_cast<float>(i) * 1e-4f;
    model.initial_parameters = std::make_shared<const std::vector<float>>(initial);
    CHECK(drawn(model, 5) == initial);
    CHECK(drawn(model, 6) == initial);  // the seed does not matter
    model.initial_parameters = std::make_shared<const std::vector<float>>(initial.begin(), initial.end() - 1);
    std::vector<float> params(initial.size());
    CHECK_THROWS_AS(nn::initialize_parameters(model, 5, params), std::invalid_argument);
    model.initial_parameters = nullptr;
    CHECK(drawn(model, 5) == fresh);
}

TEST_CASE("a run's recipe in the metadata (psrun.recipe) becomes the imported model's recipe; a damaged one is refused",
          "[onnx]") {
    const auto model = builtin("mnist_softmax");  // its own recipe: sgd 0.5
    REQUIRE(model.recipe);
    const auto params = drawn(model, 5);
    const std::string run = R"({"recipe": {"optimizer": "nesterov", "learning_rate": 0.05, "momentum": 0.8, "steps": 20,
                                "batch_size": 32, "weight_decay": 0.0005, "ema_decay": 0.99}})";
    SECTION("with the embedded description and from the graph alone") {
        for (const bool bare : {false, true}) {
            INFO("graph alone: " << bare);
            auto bytes = onnx_io::export_onnx(model, params, {{onnx_io::kRecipeKey, run}});
            REQUIRE(bytes);
            onnx::ModelProto proto;
            REQUIRE(proto.ParseFromString(*bytes));
            REQUIRE(proto.metadata_props_size() == 3);
            if (bare) proto.mutable_metadata_props()->DeleteSubrange(0, 1);  // the description goes
            auto back = onnx_io::import_onnx(proto.SerializeAsString(), "run.onnx");
            INFO((back ? std::string() : back.error().message));
            REQUIRE(back);
            REQUIRE(back->recipe);
            CHECK(nn::to_string(*back->recipe) == nn::to_string(*nn::parse_recipe_text(run, "run")));
            CHECK(back->recipe->optimizer == "nesterov");
            if (!bare)
                CHECK(nn::architecture_hash(*back) == nn::architecture_hash(model));  // the recipe is no part of it
        }
    }
    SECTION("no run recipe: the model's own") {
        auto bytes = onnx_io::export_onnx(model, params);
        REQUIRE(bytes);
        auto back = onnx_io::import_onnx(*bytes, "own.onnx");
        REQUIRE(back);
        REQUIRE(back->recipe);
        CHECK(nn::to_string(*back->recipe) == nn::to_string(*model.recipe));
    }
    SECTION("a damaged run recipe names the entry and the field") {
        auto bytes = onnx_io::export_onnx(model, params, {{onnx_io::kRecipeKey, R"({"recipe": {"ema_decay": 1.5}})"}});
        REQUIRE(bytes);
        auto back = onnx_io::import_onnx(*bytes, "bad.onnx");
        REQUIRE_FALSE(back);
        CHECK(back.error().code == ErrorCode::kInvalidArgument);
        CHECK_THAT(back.error().message,
                   Catch::Contains("model bad.onnx: metadata psrun.recipe") && Catch::Contains("ema_decay"));
        auto syntax = onnx_io::export_onnx(model, params, {{onnx_io::kRecipeKey, "{\"recipe\": "}});
        REQUIRE(syntax);
        auto back2 = onnx_io::import_onnx(*syntax, "cut.onnx");
        REQUIRE_FALSE(back2);
        CHECK_THAT(back2.error().message, Catch::Contains("metadata psrun.recipe"));
    }
}

TEST_CASE("an expand to the batch's size in an image model exports against the renamed input ('images')", "[onnx]") {
    // F.normalize's tail over an image: the batch size comes from Shape of the model's input, which
    // the export calls "images"; it read the description's own name, so the file did not import.
    auto model = nn::parse_model(nlohmann::json::parse(R"({
        "input": {"channels": 4, "height": 4, "width": 4},
        "layers": [{"kind": "flatten", "name": "f"},
                   {"kind": "mul", "name": "sq", "inputs": ["f", "f"]},
                   {"kind": "reduce_sum", "name": "s", "axes": [1], "keepdims": true},
                   {"kind": "sqrt", "name": "norm"},
                   {"kind": "expand", "name": "e", "shape": ["N", 64]},
                   {"kind": "div", "name": "unit", "inputs": ["f", "e"]},
                   {"kind": "dense", "name": "fc", "units": 6}],
        "classes": 6})"),
                                 "normalize.json");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    REQUIRE(model->input_name() != "images");
    const auto params = drawn(*model, 9);
    auto bytes = onnx_io::export_onnx(*model, params);
    REQUIRE(bytes);
    for (const bool bare : {false, true}) {
        INFO("graph alone: " << bare);
        onnx::ModelProto proto;
        REQUIRE(proto.ParseFromString(*bytes));
        if (bare) proto.clear_metadata_props();
        auto back = onnx_io::import_onnx(proto.SerializeAsString(), "normalize.onnx");
        INFO((back ? std::string() : back.error().message));
        REQUIRE(back);
        if (!bare) CHECK(nn::architecture_hash(*back) == nn::architecture_hash(*model));
        REQUIRE(back->initial_parameters);
        CHECK(same_bits(*back->initial_parameters, params));
    }
}

TEST_CASE("the recorded description is set aside when the graph was edited after export (its digest differs)",
          "[onnx]") {
    const auto model = builtin("dls_mlp");
    const auto params = drawn(model, 11);
    auto bytes = onnx_io::export_onnx(model, params);
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    auto relu =
        std::find_if(proto.mutable_graph()->mutable_node()->begin(), proto.mutable_graph()->mutable_node()->end(),
                     [](const onnx::NodeProto& n) { return n.op_type() == "Relu"; });
    REQUIRE(relu != proto.mutable_graph()->mutable_node()->end());
    SECTION("an op changed: the graph is imported, and the model says why") {
        relu->set_op_type("Sigmoid");
        auto back = onnx_io::import_onnx(proto.SerializeAsString(), "edited.onnx");
        INFO((back ? std::string() : back.error().message));
        REQUIRE(back);
        CHECK(nn::architecture_hash(*back) != nn::architecture_hash(model));
        CHECK_THAT(back->description, Catch::Contains("edited after psrun exported it"));
        const auto sigmoid = std::count_if(back->nodes.begin(), back->nodes.end(), [](const nn::Node& n) {
            return n.op == "sigmoid" || (n.op == "activation" && n.attrs.value("function", "") == "sigmoid");
        });
        CHECK(sigmoid >= 1);
    }
    SECTION("a node renamed and the parameters changed: the description still holds, with the file's values") {
        relu->set_name("renamed_by_a_tool");
        auto* init = proto.mutable_graph()->mutable_initializer(0);
        const std::string name = init->name();
        const auto* t = model.tensor(name);
        REQUIRE(t != nullptr);
        std::vector<float> values(static_cast<std::size_t>(t->size), 0.25f);
        init->clear_float_data();
        init->set_raw_data(std::string(reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
        auto back = onnx_io::import_onnx(proto.SerializeAsString(), "retrained.onnx");
        REQUIRE(back);
        CHECK(nn::architecture_hash(*back) == nn::architecture_hash(model));
        CHECK(nn::model_json(*back) == nn::model_json(model));
        REQUIRE(back->initial_parameters);
        CHECK((*back->initial_parameters)[static_cast<std::size_t>(t->offset)] == 0.25f);
    }
    SECTION("the digest is stable: the same graph gives the same value, another graph another") {
        std::set<std::string> names;
        for (const auto& t : model.tensors) names.insert(t.name);
        const std::string before = onnx_io::graph_digest(proto.graph(), names);
        CHECK(before.rfind("fnv1a64:", 0) == 0);
        CHECK(before.size() == 8 + 16);
        CHECK(onnx_io::graph_digest(proto.graph(), names) == before);
        relu->add_input("extra");
        CHECK(onnx_io::graph_digest(proto.graph(), names) != before);
    }
}

TEST_CASE("random layers export as RandomNormalLike / RandomUniformLike and the bare graph imports them back",
          "[onnx]") {
    const nlohmann::json doc{
        {"input", {{"channels", 2}, {"height", 3}, {"width", 3}}},
        {"classes", 4},
        {"layers",
         {{{"kind", "dense"}, {"name", "mu"}, {"units", 6}},
          {{"kind", "random"}, {"name", "eps"}, {"inputs", {"mu"}}, {"distribution", "normal"}, {"scale", 0.5}},
          {{"kind", "random"},
           {"name", "u"},
           {"inputs", {"mu"}},
           {"distribution", "uniform"},
           {"low", -1.0},
           {"high", 2.0}},
          {{"kind", "add"}, {"name", "z1"}, {"inputs", {"mu", "eps"}}},
          {{"kind", "mul"}, {"name", "z"}, {"inputs", {"z1", "u"}}},
          {{"kind", "dense"}, {"name", "out"}, {"units", 4}}}},
        {"loss", {{"kind", "softmax_cross_entropy"}}}};
    auto model = nn::parse_model(doc, "noise");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    const auto params = drawn(*model, 5);
    auto bytes = onnx_io::export_onnx(*model, params);
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    std::multiset<std::string> ops;
    for (const auto& node : proto.graph().node()) ops.insert(node.op_type());
    CHECK(ops.count("RandomNormalLike") == 1);
    CHECK(ops.count("RandomUniformLike") == 1);
    proto.clear_metadata_props();
    auto back = onnx_io::import_onnx(proto.SerializeAsString(), "bare.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    std::vector<std::string> noise;
    for (const auto& node : back->nodes)
        if (node.op == "random") noise.push_back(node.attrs.dump());
    CHECK(noise == std::vector<std::string>{R"({"distribution":"normal","mean":0.0,"scale":0.5})",
                                            R"({"distribution":"uniform","high":2.0,"low":-1.0})"});
}
