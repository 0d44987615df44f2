// batch_norm and layer_norm through ONNX: psrun's export (an inference BatchNormalization over
// the running statistics; LayerNorm as PyTorch's opset-13 decomposition) imported back with and
// without the embedded description; PyTorch 1.13's own exports (test/onnx/models/norm/, written
// by norm_models.py: BatchNormalization with 5 outputs in training mode, 1 in eval mode, the
// LayerNorm decomposition) computing what PyTorch computed; and the refusals.
#include <catch2/catch.hpp>

#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/rng.h"
#include "test/onnx/onnx_ops_test_util.h"
#include "test/onnx/onnx_test_graph.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"
#include "workerd/onnx/model_loader.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

using namespace psrun;
using Catch::Contains;
using onnx_io::test::refusal;

namespace onnx_norm_test {

namespace {

nn::ModelDescription load(const std::string& spec) {
    auto m = nn::load_model(spec);
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    return *m;
}

nn::ModelDescription import_file(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    REQUIRE(in);
    std::stringstream bytes;
    bytes << in.rdbuf();
    auto m = onnx_io::import_onnx(bytes.str(), path);
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    return *m;
}

// Seeded parameters with the normalisation layers' tensors away from ones and zeros (running
// variances positive).
std::vector<float> parameters(const nn::ModelDescription& m, std::uint64_t seed) {
    std::vector<float> p(static_cast<std::size_t>(m.parameter_count));
    nn::initialize_parameters(m, seed, p);
    psrun::Rng rng(seed, 99);
    for (const auto& t : m.tensors) {
        const bool var = t.name.size() > 4 && t.name.substr(t.name.size() - 4) == "/var";
        const bool norm = t.cls == nn::TensorClass::kState || t.name.find("/scale") != std::string::npos ||
                          t.name.find("/bias") != std::string::npos;
        if (!norm) continue;
        for (std::int64_t i = 0; i < t.size; ++i) {
            float& v = p[static_cast<std::size_t>(t.offset + i)];
            v += static_cast<float>(var ? rng.uniform() : rng.uniform() - 0.5);
        }
    }
    return p;
}

std::vector<float> run(const nn::ModelDescription& m, std::vector<float> params, const std::vector<float>& x,
                       std::int64_t batch, bool forward_only = true) {
    std::vector<float> grads(forward_only ? 0 : params.size());
    auto net = nn::Network::create(m, nn::NetworkOptions{batch, nn::Precision::kF32, forward_only}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    REQUIRE((*net)->input().size() == x.size());
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    (*net)->forward(false);
    return {(*net)->outputs().begin(), (*net)->outputs().end()};
}

void check_close(const std::vector<float>& a, const std::vector<float>& b, double tolerance) {
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(a[i] == Approx(b[i]).epsilon(tolerance).margin(tolerance));
}

std::vector<float> random_input(const nn::ModelDescription& m, std::int64_t batch, std::uint64_t seed) {
    psrun::Rng rng(seed);
    std::vector<float> x(static_cast<std::size_t>(*nn::elements_per_example(m.input().dims) * batch));
    for (auto& v : x) v = static_cast<float>(2.0 * rng.uniform() - 0.5);
    return x;
}

std::vector<std::string> op_types(const onnx::GraphProto& g) {
    std::vector<std::string> out;
    for (const auto& n : g.node()) out.push_back(n.op_type());
    return out;
}

const onnx::AttributeProto* attribute(const onnx::NodeProto& n, const std::string& name) {
    for (const auto& a : n.attribute())
        if (a.name() == name) return &a;
    return nullptr;
}

// small_cnn with a BatchNormalization between the Conv and the Relu (PyTorch's training export:
// 5 outputs, the last four dangling).
onnx_io::test::TestGraph cnn_with_bn() {
    auto g = onnx_io::test::small_cnn();
    auto& graph = *g.model.mutable_graph();
    onnx_io::add_float_tensor(graph, "bn.weight", {2}, std::vector<float>{1.5f, 0.5f});
    onnx_io::add_float_tensor(graph, "bn.bias", {2}, std::vector<float>{0.1f, -0.2f});
    onnx_io::add_float_tensor(graph, "bn.running_mean", {2}, std::vector<float>{0.3f, -0.1f});
    onnx_io::add_float_tensor(graph, "bn.running_var", {2}, std::vector<float>{2.0f, 0.7f});
    auto* bn = g.add_node("BatchNormalization", "/bn/BatchNormalization",
                          {"/0/Conv_output_0", "bn.weight", "bn.bias", "bn.running_mean", "bn.running_var"}, "bn_y");
    for (int k = 1; k < 5; ++k) bn->add_output("bn_out_" + std::to_string(k));
    onnx_io::set_float(*bn, "epsilon", 1e-5f);
    onnx_io::set_float(*bn, "momentum", 0.9f);
    g.node("/1/Relu")->set_input(0, "bn_y");
    g.order({"/0/Conv", "/bn/BatchNormalization", "/1/Relu", "/2/MaxPool", "/3/Flatten", "/4/Gemm", "/5/Softmax"});
    return g;
}

}  // namespace

TEST_CASE("batch_norm and layer_norm export at opset 13 and import back, with and without the description",
          "[onnx][norm]") {
    const auto model = load("test/onnx/models/norm_layers.json");
    const auto params = parameters(model, 7);
    auto bytes = onnx_io::export_onnx(model, params);
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    const auto& g = proto.graph();
    const auto ops = op_types(g);
    CHECK(std::count(ops.begin(), ops.end(), "BatchNormalization") == 3);
    for (const auto& n : g.node()) {
        if (n.op_type() != "BatchNormalization") continue;
        CHECK(n.input_size() == 5);
        CHECK(n.output_size() == 1);
        REQUIRE(attribute(n, "momentum") != nullptr);
        CHECK(attribute(n, "momentum")->f() == (n.name() == "bn2" ? 0.8f : 0.9f));  // ONNX's: 1 - PyTorch's
        CHECK(attribute(n, "epsilon")->f() == (n.name() == "bn2" ? 1e-3f : 1e-5f));
        CHECK(n.input(3) == n.name() + "/mean");  // the running statistics under their names
        CHECK(n.input(4) == n.name() + "/var");
    }
    // nn.LayerNorm's opset-13 decomposition, as PyTorch writes it.
    std::vector<std::string> ln;
    for (const auto& n : g.node())
        if (n.name().rfind("ln1", 0) == 0) ln.push_back(n.op_type());
    CHECK(ln == std::vector<std::string>{"ReduceMean", "Sub", "Pow", "ReduceMean", "Add", "Sqrt", "Div", "Mul", "Add"});

    auto back = onnx_io::import_onnx(*bytes, "x.onnx");
    REQUIRE(back);
    CHECK(nn::architecture_hash(*back) == nn::architecture_hash(model));
    CHECK(*back->initial_parameters == params);

    proto.clear_metadata_props();
    auto bare = onnx_io::import_onnx(proto.SerializeAsString(), "bare.onnx");
    INFO((bare ? std::string() : bare.error().message));
    REQUIRE(bare);
    int batch_norms = 0, layer_norms = 0;
    for (const auto& n : bare->nodes) {
        batch_norms += n.op == "batch_norm";
        layer_norms += n.op == "layer_norm";
    }
    CHECK(batch_norms == 3);
    CHECK(layer_norms == 1);
    REQUIRE(bare->tensor("bn2/var") != nullptr);
    CHECK(bare->tensor("bn2/var")->cls == nn::TensorClass::kState);
    CHECK(bare->tensor("ln1/scale")->cls == nn::TensorClass::kTrainable);
    CHECK(bare->parameter_count == model.parameter_count);
    const auto x = random_input(model, 3, 5);
    check_close(run(*bare, *bare->initial_parameters, x, 3), run(model, params, x, 3), 1e-4);
    // A training network over the same parameters evaluates the same (forward(false)).
    check_close(run(*bare, *bare->initial_parameters, x, 3, false), run(model, params, x, 3), 1e-4);
}

TEST_CASE("without scale or bias the export writes constant ones and zeros; the graph computes the same",
          "[onnx][norm]") {
    const nlohmann::json doc = {{"input", {{"shape", {6}}}},
                                {"layers",
                                 {{{"kind", "dense"}, {"name", "d"}, {"units", 5}},
                                  {{"kind", "batch_norm"}, {"name", "bn"}, {"scale", false}, {"center", false}},
                                  {{"kind", "layer_norm"}, {"name", "ln"}, {"scale", false}},
                                  {{"kind", "layer_norm"}, {"name", "ln2"}, {"center", false}},
                                  {{"kind", "dense"}, {"name", "out"}, {"units", 3}}}},
                                {"loss", {{"kind", "mean_squared_error"}}}};
    auto model = nn::parse_model(doc, "t");
    REQUIRE(model);
    const auto params = parameters(*model, 3);
    auto bytes = onnx_io::export_onnx(*model, params);
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    proto.clear_metadata_props();
    auto bare = onnx_io::import_onnx(proto.SerializeAsString(), "bare.onnx");
    INFO((bare ? std::string() : bare.error().message));
    REQUIRE(bare);
    const auto x = random_input(*model, 4, 9);
    check_close(run(*bare, *bare->initial_parameters, x, 4), run(*model, params, x, 4), 1e-4);
}

TEST_CASE("PyTorch 1.13's BatchNorm (training and eval exports) and LayerNorm compute what PyTorch computed",
          "[onnx][norm]") {
    std::ifstream in("test/onnx/models/norm/reference.json");
    REQUIRE(in);
    const auto ref = nlohmann::json::parse(in);
    const auto x = ref.at("input").get<std::vector<float>>();
    const std::int64_t batch = ref.at("shape")[0].get<std::int64_t>();

    // Training export: 5 outputs per BatchNormalization, the statistics bound to state tensors.
    const auto train = import_file("test/onnx/models/norm/bn_train.onnx");
    std::vector<std::string> kinds;
    for (const auto& n : train.nodes) kinds.push_back(n.op);
    CHECK(std::count(kinds.begin(), kinds.end(), "batch_norm") == 2);
    const nn::Node* bn1 = nullptr;
    for (const auto& n : train.nodes)
        if (n.op == "batch_norm" && bn1 == nullptr) bn1 = &n;
    REQUIRE(bn1 != nullptr);
    CHECK(bn1->attrs.at("momentum").get<double>() == 0.2);  // ONNX 0.8f
    CHECK(bn1->attrs.at("epsilon").get<double>() == 1e-5);
    for (const auto* name : {"bn1.running_mean", "bn1.running_var", "bn2.running_mean", "bn2.running_var"}) {
        INFO(name);
        REQUIRE(train.tensor(name) != nullptr);
        CHECK(train.tensor(name)->cls == nn::TensorClass::kState);
    }
    // PyTorch 1.13's training export writes the running statistics as its tracing forward left
    // them (one training forward on the batch): what PyTorch's own training forward left.
    auto values = [](const nn::ModelDescription& m, const std::vector<float>& p, const std::string& name) {
        const nn::TensorDef* t = m.tensor(name);
        REQUIRE(t != nullptr);
        return std::vector<float>(p.begin() + t->offset, p.begin() + t->offset + t->size);
    };
    for (const auto& [name, stats] : ref.at("running").items()) {
        INFO(name);
        check_close(values(train, *train.initial_parameters, name), stats.get<std::vector<float>>(), 1e-6);
    }
    std::vector<float> params = *train.initial_parameters, grads(params.size());
    auto net = nn::Network::create(train, nn::NetworkOptions{batch, nn::Precision::kF32, false}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    (*net)->forward(true);
    {
        INFO("bn_train.onnx, training forward (batch statistics)");
        check_close({(*net)->outputs().begin(), (*net)->outputs().end()},
                    ref.at("bn_train_out").get<std::vector<float>>(), 1e-4);
    }

    // Eval export: Conv + BatchNorm2d folded by PyTorch, the BatchNorm1d kept with 1 output and
    // the statistics before any training forward (S0).
    const auto eval = import_file("test/onnx/models/norm/bn_eval.onnx");
    int batch_norms = 0;
    for (const auto& n : eval.nodes) batch_norms += n.op == "batch_norm";
    CHECK(batch_norms == 1);
    check_close(run(eval, *eval.initial_parameters, x, batch), ref.at("bn_eval_out").get<std::vector<float>>(), 1e-4);

    // The training forward's update on bn2 (momentum 0.1), params - delta: the same batch again
    // moves S1 = 0.9 S0 + 0.1 B to S2 = 0.9 S1 + 0.1 B = S1 + 0.9 (S1 - S0).
    for (const auto* name : {"bn2.running_mean", "bn2.running_var"}) {
        INFO(name);
        const auto s0 = values(eval, *eval.initial_parameters, name), s1 = values(train, params, name);
        const auto g = values(train, grads, name);
        std::vector<float> updated, want;
        for (std::size_t i = 0; i < s1.size(); ++i) {
            updated.push_back(s1[i] - g[i]);
            want.push_back(s1[i] + 0.9f * (s1[i] - s0[i]));
        }
        check_close(updated, want, 1e-5);
    }

    // nn.LayerNorm's decomposition is one layer_norm.
    const auto ln = import_file("test/onnx/models/norm/ln.onnx");
    kinds.clear();
    for (const auto& n : ln.nodes) kinds.push_back(n.op);
    CHECK(kinds == std::vector<std::string>{"flatten", "dense", "layer_norm", "gelu", "dense"});
    CHECK(ln.nodes[2].attrs.at("epsilon").get<double>() == 1e-5);  // 1e-5f as written, not 9.99999974e-06
    check_close(run(ln, *ln.initial_parameters, x, batch), ref.at("ln_out").get<std::vector<float>>(), 1e-4);
}

TEST_CASE("a PyTorch-style BatchNormalization imports; what the engine cannot honour is refused by name",
          "[onnx][norm]") {
    auto g = cnn_with_bn();
    auto m = onnx_io::import_onnx(g.bytes(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    REQUIRE(m->nodes.size() == 6);
    CHECK(m->nodes[1].op == "batch_norm");
    CHECK(m->nodes[1].attrs.at("momentum").get<double>() == 0.1);
    CHECK(m->tensor("bn.running_var")->cls == nn::TensorClass::kState);

    auto three = cnn_with_bn();
    three.node("/bn/BatchNormalization")->mutable_output()->RemoveLast();
    three.node("/bn/BatchNormalization")->mutable_output()->RemoveLast();
    CHECK_THAT(refusal(three), Contains("node '/bn/BatchNormalization' (BatchNormalization): 3 outputs: at opset 13 "
                                        "the importer reads 1 (inference) or 5 (PyTorch's training export)"));
    // Opset 14 and later: training_mode = 1 and 3 outputs (Y, running mean, running var).
    auto opset14 = cnn_with_bn();
    opset14.model.mutable_opset_import(0)->set_version(14);
    opset14.node("/bn/BatchNormalization")->mutable_output()->RemoveLast();
    opset14.node("/bn/BatchNormalization")->mutable_output()->RemoveLast();
    onnx_io::set_int(*opset14.node("/bn/BatchNormalization"), "training_mode", 1);
    auto m14 = onnx_io::import_onnx(opset14.bytes(), "t.onnx");
    INFO((m14 ? std::string() : m14.error().message));
    REQUIRE(m14);
    CHECK(m14->nodes[1].op == "batch_norm");
    CHECK(m14->tensor("bn.running_mean")->cls == nn::TensorClass::kState);
    opset14.node("/bn/BatchNormalization")->mutable_attribute()->rbegin()->set_i(2);  // training_mode
    CHECK_THAT(refusal(opset14), Contains("training_mode must be 0 or 1"));
    opset14.node("/bn/BatchNormalization")->mutable_output()->RemoveLast();
    opset14.node("/bn/BatchNormalization")->mutable_attribute()->rbegin()->set_i(1);
    CHECK_THAT(refusal(opset14), Contains("2 outputs: at opset 14 the importer reads 1 (inference) or 3"));
    auto read = cnn_with_bn();  // an updated statistic read by another node: not computed here
    read.node("/1/Relu")->set_input(0, "bn_out_1");
    CHECK_THAT(refusal(read), Contains("(BatchNormalization): output 1 ('bn_out_1') is not supported"));
    auto computed = cnn_with_bn();  // running statistics that are no initializer
    computed.node("/bn/BatchNormalization")->set_input(3, "/0/Conv_output_0");
    CHECK_THAT(refusal(computed), Contains("slot \"mean\" is a state slot: it cannot bind the computed value"));
}

}  // namespace onnx_norm_test
