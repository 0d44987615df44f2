// The cross-entropy kinds as a model's own loss (LossKind::kGraph, "loss": {"kind": "graph"}),
// trained through Network::train_step from JSON and from ONNX graphs as torch.onnx writes them;
// the ONNX import of SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss (as PyTorch writes
// the nodes) and the export back. Shared helpers: cross_entropy_test_util.h.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/rng.h"
#include "test/nn/cross_entropy_test_util.h"
#include "test/nn/ops_test_util.h"
#include "workerd/nn/model_summary.h"
#include "workerd/onnx/onnx_model.h"
#include "workerd/onnx/onnx_proto.h"

namespace psrun::nn::test {
namespace {

using Catch::Contains;
using nlohmann::json;

TEST_CASE("a scalar cross-entropy as the model's own loss trains through train_step", "[cross_entropy][graph_loss]") {
    const std::string kind = GENERATE("softmax_cross_entropy_loss", "nll_loss");
    const std::string reduction = GENERATE("mean", "sum");
    const bool token = GENERATE(false, true);
    const int weighting = GENERATE(0, 1, 2);
    CAPTURE(kind, reduction, token, weighting);
    const std::int64_t batch = 4, classes = 3, length = token ? 5 : 1;
    LossSpec s{kind, reduction, 2, kind == "nll_loss" ? 0.0 : 0.1};
    if (weighting > 0) s.weights = {0.5f, 2.0f, 1.25f};
    s.weights_trained = weighting == 2;
    const auto m = token ? graph_loss_model(s, {classes, length}, {length}) : graph_loss_model(s, {classes}, {});
    const auto x = random_vector(static_cast<std::size_t>(batch * classes * length), 51, 2.0);
    std::vector<std::int32_t> labels;
    psrun::Rng rng(52);
    for (std::int64_t q = 0; q < batch * length; ++q) labels.push_back(static_cast<std::int32_t>(rng.below(classes)));
    labels[0] = 2;  // ignored
    labels[1] = 0;
    const auto got = train_step(m, s, batch, x, labels);
    const auto ref = reference(s, x, labels, batch, classes, length, {1.0});
    CHECK(got.loss == Approx(ref.reduced).epsilon(1e-5));
    check_close(got.dx, ref.dx, 1e-5);
    for (const float g : got.grads) CHECK(g == 0.0f);  // the trained class weights: zero, written
}

TEST_CASE("PyTorch's numbers through train_step: a per-token weighted, smoothed mean", "[cross_entropy][graph_loss]") {
    LossSpec s{"softmax_cross_entropy_loss", "mean", -100, 0.2, {0.3f, 1.5f, 0.8f}};
    const auto got = train_step(graph_loss_model(s, {3, 4}, {4}), s, 2, kX2x3x4, kTokenLabels);
    CHECK(got.loss == Approx(1.85308785).epsilon(1e-6));  // token_weighted_smoothed_mean
    check_close(got.dx,
                {-0.0292325182,
                 0.0203518413,
                 0,
                 0.15789726,
                 0.0318489985,
                 0.0402866958,
                 0,
                 -0.232078316,
                 -0.00261648028,
                 -0.0606385371,
                 0,
                 0.0741810568,
                 0.033760512,
                 0,
                 -0.0432300042,
                 0.0619359375,
                 -0.229361022,
                 0,
                 0.0260327204,
                 -0.0013030574,
                 0.19560051,
                 0,
                 0.0171972838,
                 -0.0606328801},
                1e-6);
}

// --- ONNX ---

void set_string_attr(onnx::NodeProto& node, const std::string& name, const std::string& value) {
    auto* a = node.add_attribute();
    a->set_name(name);
    a->set_type(onnx::AttributeProto::STRING);
    a->set_s(value);
}

void add_value(google::protobuf::RepeatedPtrField<onnx::ValueInfoProto>* list, const std::string& name, int type,
               const std::vector<std::int64_t>& dims) {
    auto* v = list->Add();
    v->set_name(name);
    auto* t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(type);
    t->mutable_shape()->add_dim()->set_dim_param("batch");
    for (const auto d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

// A graph as torch.onnx writes F.cross_entropy(x, y, weight=w, reduction="none") at opset 13 on
// x [N, 3, 4], y [N, 4] (int64): SoftmaxCrossEntropyLoss with ignore_index -100 and the weights
// an initializer. With `log_prob`, the node's second output is read too: output = loss +
// ReduceSum(log_prob, axis 1). `op`: NegativeLogLikelihoodLoss reads x as log-probabilities.
onnx::ModelProto torch_graph(const std::string& op, bool log_prob, const std::string& reduction = "none",
                             bool token = true) {
    onnx::ModelProto model;
    model.set_ir_version(7);
    model.set_producer_name("pytorch");
    model.add_opset_import()->set_version(13);
    auto& g = *model.mutable_graph();
    g.set_name("torch_jit");
    add_value(g.mutable_input(), "x", onnx::TensorProto::FLOAT,
              token ? std::vector<std::int64_t>{3, 4} : std::vector<std::int64_t>{3});
    add_value(g.mutable_input(), "y", onnx::TensorProto::INT64,
              token ? std::vector<std::int64_t>{4} : std::vector<std::int64_t>{});
    const std::vector<float> w = {0.3f, 1.5f, 0.8f};
    onnx_io::add_float_tensor(g, "w", {3}, w);
    auto* n = g.add_node();
    n->set_op_type(op);
    n->set_name("/SoftmaxCrossEntropyLoss");
    for (const char* i : {"x", "y", "w"}) n->add_input(i);
    n->add_output(log_prob ? "loss" : "out");
    if (log_prob) n->add_output("log_prob");
    set_string_attr(*n, "reduction", reduction);
    onnx_io::set_int(*n, "ignore_index", -100);
    if (log_prob) {
        auto* axes = g.add_initializer();
        axes->set_name("axes");
        axes->set_data_type(onnx::TensorProto::INT64);
        axes->add_dims(1);
        axes->add_int64_data(1);
        auto* sum = g.add_node();
        sum->set_op_type("ReduceSum");
        sum->set_name("/ReduceSum");
        sum->add_input("log_prob");
        sum->add_input("axes");
        sum->add_output("lp_sum");
        onnx_io::set_int(*sum, "keepdims", 0);
        auto* add = g.add_node();
        add->set_op_type("Add");
        add->set_name("/Add");
        add->add_input("loss");
        add->add_input("lp_sum");
        add->add_output("out");
    }
    if (reduction == "none") {
        add_value(g.mutable_output(), "out", onnx::TensorProto::FLOAT, {4});
    } else {  // a scalar
        auto* v = g.add_output();
        v->set_name("out");
        v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
        v->mutable_type()->mutable_tensor_type()->mutable_shape();
    }
    return model;
}

std::vector<float> forward_outputs(const ModelDescription& m, const std::vector<float>& params,
                                   const std::vector<float>& x, const std::vector<std::int32_t>& labels) {
    std::vector<float> p = params, grads;
    auto net = Network::create(m, NetworkOptions{2, Precision::kF32, true}, p, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(x.begin(), x.end(), (*net)->input(0).begin());
    std::copy(labels.begin(), labels.end(), (*net)->input_ids(1).begin());
    (*net)->forward(false);
    return {(*net)->outputs().begin(), (*net)->outputs().end()};
}

TEST_CASE("ONNX SoftmaxCrossEntropyLoss and NegativeLogLikelihoodLoss import as PyTorch writes them",
          "[cross_entropy][onnx]") {
    const std::string op = GENERATE("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss");
    CAPTURE(op);
    auto m = onnx_io::import_onnx(torch_graph(op, false).SerializeAsString(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    const Node* loss = nullptr;
    for (const auto& n : m->nodes)
        if (n.op == (op == "SoftmaxCrossEntropyLoss" ? "softmax_cross_entropy_loss" : "nll_loss")) loss = &n;
    REQUIRE(loss != nullptr);
    CHECK(loss->attrs.at("reduction") == "none");
    CHECK(loss->attrs.at("ignore_index") == -100);
    REQUIRE(loss->data_inputs == 3);
    CHECK(m->nodes[0].op == "constant");  // the weights: not a trained tensor
    CHECK(m->parameter_count == 0);
    REQUIRE(m->inputs.size() == 2);
    CHECK(m->inputs[1].info.type == ElementType::kInt);
    const auto out = forward_outputs(*m, {}, kX2x3x4, kTokenLabels);
    LossSpec s{op == "SoftmaxCrossEntropyLoss" ? "softmax_cross_entropy_loss" : "nll_loss",
               "none",
               -100,
               0.0,
               {0.3f, 1.5f, 0.8f}};
    const auto ref = reference(s, kX2x3x4, kTokenLabels, 2, 3, 4, std::vector<double>(8, 1.0));
    check_close(out, ref.loss, 1e-5);
}

TEST_CASE("ONNX SoftmaxCrossEntropyLoss's log_prob output imports as a log_softmax over axis 1",
          "[cross_entropy][onnx]") {
    auto m = onnx_io::import_onnx(torch_graph("SoftmaxCrossEntropyLoss", true).SerializeAsString(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    bool found = false;
    for (const auto& n : m->nodes)
        if (n.op == "log_softmax") found = n.attrs.at("axis") == 1;
    CHECK(found);
    const auto out = forward_outputs(*m, {}, kX2x3x4, kTokenLabels);
    LossSpec s{"softmax_cross_entropy_loss", "none", -100, 0.0, {0.3f, 1.5f, 0.8f}};
    const auto ref = reference(s, kX2x3x4, kTokenLabels, 2, 3, 4, std::vector<double>(8, 1.0));
    std::vector<double> expected;
    for (std::int64_t q = 0; q < 8; ++q) {  // loss + sum_c log_softmax(x)_c
        const std::int64_t n = q / 4, l = q % 4;
        double mx = -1e30, sum = 0, lp = 0;
        for (int c = 0; c < 3; ++c)
            mx = std::max(mx, static_cast<double>(kX2x3x4[static_cast<std::size_t>(n * 12 + c * 4 + l)]));
        for (int c = 0; c < 3; ++c) sum += std::exp(kX2x3x4[static_cast<std::size_t>(n * 12 + c * 4 + l)] - mx);
        for (int c = 0; c < 3; ++c) lp += kX2x3x4[static_cast<std::size_t>(n * 12 + c * 4 + l)] - mx - std::log(sum);
        expected.push_back(ref.loss[static_cast<std::size_t>(q)] + lp);
    }
    check_close(out, expected, 1e-5);
}

TEST_CASE("cross-entropy losses export at opset 13 and import back; label smoothing does not export",
          "[cross_entropy][onnx]") {
    const std::string kind = GENERATE("softmax_cross_entropy_loss", "nll_loss");
    CAPTURE(kind);
    LossSpec s{kind, "none", -100, 0.0, {0.3f, 1.5f, 0.8f}};
    const auto m = parse_ok(loss_document(s, {3, 4}, {4}));
    auto bytes = onnx_io::export_onnx(m, {});
    INFO((bytes ? std::string() : bytes.error().message));
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    bool written = false;
    for (const auto& n : proto.graph().node())
        if (n.op_type() == (kind == "nll_loss" ? "NegativeLogLikelihoodLoss" : "SoftmaxCrossEntropyLoss")) {
            written = true;
            CHECK(n.input_size() == 3);
            for (const auto& a : n.attribute()) {
                if (a.name() == "reduction") CHECK(a.s() == "none");
                if (a.name() == "ignore_index") CHECK(a.i() == -100);
            }
        }
    CHECK(written);
    proto.clear_metadata_props();  // the graph alone
    auto back = onnx_io::import_onnx(proto.SerializeAsString(), "t.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    std::vector<std::string> kinds;
    for (const auto& n : back->nodes) kinds.push_back(n.op);
    CHECK(std::count(kinds.begin(), kinds.end(), kind) == 1);
    const auto a = forward_outputs(m, {}, kX2x3x4, kTokenLabels);
    const auto b = forward_outputs(*back, *back->initial_parameters, kX2x3x4, kTokenLabels);
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) CHECK(b[i] == Approx(a[i]).epsilon(1e-6).margin(1e-7));

    if (kind == "nll_loss") return;
    LossSpec smoothed = s;
    smoothed.smoothing = 0.1;
    auto refused = onnx_io::export_onnx(parse_ok(loss_document(smoothed, {3, 4}, {4})), {});
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Contains("ONNX's SoftmaxCrossEntropyLoss has no label smoothing"));
}

TEST_CASE("a module returning its cross-entropy (a scalar) imports as a graph loss, trains, exports and imports back",
          "[cross_entropy][onnx][graph_loss]") {
    const std::string op = GENERATE("SoftmaxCrossEntropyLoss", "NegativeLogLikelihoodLoss");
    const bool token = GENERATE(false, true);
    CAPTURE(op, token);
    auto m = onnx_io::import_onnx(torch_graph(op, false, "mean", token).SerializeAsString(), "t.onnx");
    INFO((m ? std::string() : m.error().message));
    REQUIRE(m);
    CHECK(m->loss == LossKind::kGraph);
    if (token) {  // per-position labels [N, 4]: an input of their own; x a per-position head
        CHECK(m->label_input == -1);
        CHECK(m->head.empty());
        REQUIRE(m->heads.size() == 1);
        CHECK(m->heads[0].value == "x");
        CHECK(m->heads[0].width == 3);
        CHECK(m->heads[0].spatial == std::vector<std::int64_t>{4});
        CHECK(m->heads[0].ignore_index == std::optional<std::int64_t>(-100));
    } else {  // y [N]: the data's labels, x the head's class scores
        CHECK(m->label_input == 1);
        CHECK(m->head == "x");
        CHECK(m->classes == 3);
    }
    const std::int64_t batch = token ? 2 : 8;
    const std::vector<std::int32_t> labels =
        token ? kTokenLabels : std::vector<std::int32_t>{0, 2, 1, -100, 1, 0, 2, 2};
    const std::vector<float> x(kX2x3x4.begin(), kX2x3x4.end());  // 24 values: [2, 3, 4] or [8, 3]
    LossSpec s{op == "SoftmaxCrossEntropyLoss" ? "softmax_cross_entropy_loss" : "nll_loss",
               "mean",
               -100,
               0.0,
               {0.3f, 1.5f, 0.8f}};
    const auto ref = reference(s, x, labels, batch, 3, token ? 4 : 1, {1.0});
    const auto got = train_step(*m, s, batch, x, labels, *m->initial_parameters);
    CHECK(got.loss == Approx(ref.reduced).epsilon(1e-5));
    check_close(got.dx, ref.dx, 1e-5);

    auto bytes = onnx_io::export_onnx(*m, *m->initial_parameters);
    INFO((bytes ? std::string() : bytes.error().message));
    REQUIRE(bytes);
    onnx::ModelProto proto;
    REQUIRE(proto.ParseFromString(*bytes));
    proto.clear_metadata_props();
    auto back = onnx_io::import_onnx(proto.SerializeAsString(), "t.onnx");
    INFO((back ? std::string() : back.error().message));
    REQUIRE(back);
    CHECK(back->loss == LossKind::kGraph);
    CHECK(back->label_input == m->label_input);
    const auto again = train_step(*back, s, batch, x, labels, *back->initial_parameters);
    CHECK(again.loss == got.loss);
    CHECK(again.dx == got.dx);
}

}  // namespace
}  // namespace psrun::nn::test
