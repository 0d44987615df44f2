// A model that ends in its own loss (LossKind::kGraph, workerd/nn/graph_loss.h): the JSON
// form {"kind": "graph", "labels": NAME}, the label input and head found or named, the errors,
// the canonical form and hash, and the engine: the data's labels written through labels()
// reach the graph's label input, the loss is the graph's scalar, the gradient of a two-head
// sum is the sum of each head's hand-computed gradient, and predictions come from the head.
#include <catch2/catch.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "test/nn/graph_test_helpers.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/network.h"

using namespace psrun::nn;
using namespace psrun::nn::test;
using Catch::Contains;
using nlohmann::json;

namespace {

// x [N, 4] -> dense "logits" 3 -> softmax_cross_entropy_loss with y [N]; with `second_head`,
// plus 0.5 x the mean of (dense "reg" 2 - t)^2 over every axis (t [N, 2] floats, a column).
json classifier(bool second_head = false, json loss = {{"kind", "graph"}}) {
    json inputs = {{{"name", "x"}, {"dims", {4}}}, {{"name", "y"}, {"dims", json::array()}, {"type", "int"}}};
    json layers = {{{"kind", "dense"}, {"name", "logits"}, {"inputs", {"x"}}, {"units", 3}},
                   {{"kind", "softmax_cross_entropy_loss"}, {"name", "ce"}, {"inputs", {"logits", "y"}}}};
    if (second_head) {
        inputs.push_back({{"name", "t"}, {"dims", {2}}, {"type", "float"}});
        layers.push_back({{"kind", "dense"}, {"name", "reg"}, {"inputs", {"x"}}, {"units", 2}});
        layers.push_back({{"kind", "sub"}, {"name", "diff"}, {"inputs", {"reg", "t"}}});
        layers.push_back({{"kind", "mul"}, {"name", "sq"}, {"inputs", {"diff", "diff"}}});
        layers.push_back({{"kind", "reduce_mean"}, {"name", "mse"}, {"axes", {0, 1}}, {"keepdims", false}});
        layers.push_back({{"kind", "constant"}, {"name", "half"}, {"shape", json::array()}, {"values", {0.5}}});
        layers.push_back({{"kind", "mul"}, {"name", "weighted"}, {"inputs", {"mse", "half"}}});
        layers.push_back({{"kind", "add"}, {"name", "total"}, {"inputs", {"ce", "weighted"}}});
    }
    return {{"inputs", inputs}, {"layers", layers}, {"loss", loss}};
}

std::vector<float> loss_model_parameters(const ModelDescription& model) {
    std::vector<float> p(static_cast<std::size_t>(model.parameter_count));
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.3f * std::sin(0.7f * static_cast<float>(i) + 0.2f);
    return p;
}

}  // namespace

TEST_CASE("graph loss: the label input and head found, the JSON form round-trips", "[graph_loss]") {
    const ModelDescription m = parse_ok(classifier());
    CHECK(m.loss == LossKind::kGraph);
    CHECK(m.label_input == 1);
    CHECK(m.head == "logits");
    CHECK(m.classes == 3);
    CHECK(m.classification());
    CHECK(m.metric_loss() == LossKind::kSoftmaxCrossEntropy);
    CHECK(m.fed_by_labels(1));
    CHECK_FALSE(m.column_inputs());
    // What `psrun model show` prints: the label input [N] and the loss [] are told apart.
    CHECK(shape_text(m.inputs[1].info.dims) == "scalar per example");
    CHECK(shape_text(m.nodes.back().output_info.front().dims) == "scalar");
    CHECK(shape_text(m.inputs[0].info.dims) == "4");
    CHECK(m.value(m.output).dims.empty());
    const json canonical = canonical_architecture(m);
    CHECK(canonical.at("loss") == json{{"kind", "graph"}, {"labels", "y"}});
    CHECK_FALSE(canonical.contains("classes"));
    const ModelDescription again = parse_ok(model_json(m));
    CHECK(architecture_hash(again) == architecture_hash(m));
    CHECK(again.label_input == 1);

    // Named explicitly; the second head's targets are a column input.
    const ModelDescription two = parse_ok(classifier(true, {{"kind", "graph"}, {"labels", "y"}}));
    CHECK(two.label_input == 1);
    CHECK(two.head == "logits");
    CHECK(two.column_inputs());
    CHECK_FALSE(two.fed_by_labels(2));
}

TEST_CASE("graph loss: what does not fit is named", "[graph_loss]") {
    // The output is not a scalar (the per-example losses).
    json per_example = classifier();
    per_example["layers"][1]["reduction"] = "none";
    CHECK_THAT(parse_error(per_example), Contains("a graph loss is a float scalar"));
    // A built-in loss on a scalar output, and a graph loss on logits.
    json logits_only = classifier();
    logits_only["layers"].erase(1);
    logits_only["inputs"].erase(1);
    CHECK_THAT(parse_error(logits_only), Contains("a graph loss is a float scalar"));
    CHECK_THAT(parse_error(classifier(false, {{"kind", "graph"}, {"labels", "z"}})),
               Contains("\"labels\" \"z\" is not one of the model's inputs"));
    CHECK_THAT(parse_error(classifier(false, {{"kind", "graph"}, {"labels", "x"}})),
               Contains("cannot be the primary input \"x\""));
    CHECK_THAT(parse_error(classifier(false, {{"kind", "graph"}, {"reduction", "sum"}})), Contains("reduction"));
    // Float labels of one value per example: a float [N] input is legal (a timestep, a scalar
    // feature), but a softmax loss reads int classes.
    json float_labels = classifier();
    float_labels["inputs"][1]["type"] = "float";
    CHECK_THAT(parse_error(float_labels), Contains("must hold integer class ids, got floats N"));
}

TEST_CASE("graph loss: the engine trains the graph's scalar; labels feed the label input", "[graph_loss]") {
    const ModelDescription m = parse_ok(classifier(true));
    const std::int64_t n = 4;
    std::vector<float> params = loss_model_parameters(m), grads(params.size(), 0.0f);
    NetworkOptions options;
    options.batch_size = n;
    auto net = Network::create(m, options, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    Network& network = **net;
    auto x = network.input(0);
    for (std::size_t k = 0; k < x.size(); ++k) x[k] = 0.25f * std::cos(1.3f * static_cast<float>(k));
    const std::vector<std::int32_t> labels = {0, 2, 1, 2};
    REQUIRE(network.labels().size() == labels.size());
    std::copy(labels.begin(), labels.end(), network.labels().begin());
    CHECK(std::vector<std::int32_t>(network.input_ids(1).begin(), network.input_ids(1).end()) == labels);
    auto t = network.input(2);
    for (std::size_t k = 0; k < t.size(); ++k) t[k] = 0.1f * static_cast<float>(k) - 0.3f;
    const float loss = network.train_step(1);

    // By hand: logits = x W^T + b (dense's w is [units, in]), CE mean over the batch, plus
    // 0.5 x the mean of the squared differences of the second head.
    const TensorDef& w = *m.tensor("logits/w");
    const TensorDef& b = *m.tensor("logits/b");
    const TensorDef& rw = *m.tensor("reg/w");
    const TensorDef& rb = *m.tensor("reg/b");
    double ce = 0, mse = 0;
    std::vector<double> db(3, 0.0), drb(2, 0.0);
    for (std::int64_t i = 0; i < n; ++i) {
        std::vector<double> z(3);
        for (int c = 0; c < 3; ++c) {
            z[static_cast<std::size_t>(c)] = params[static_cast<std::size_t>(b.offset + c)];
            for (int k = 0; k < 4; ++k)
                z[static_cast<std::size_t>(c)] +=
                    params[static_cast<std::size_t>(w.offset + c * 4 + k)] * x[static_cast<std::size_t>(i * 4 + k)];
        }
        double mx = std::max({z[0], z[1], z[2]}), sum = 0;
        for (double v : z) sum += std::exp(v - mx);
        const auto y = static_cast<std::size_t>(labels[static_cast<std::size_t>(i)]);
        ce += (std::log(sum) + mx - z[y]) / n;
        for (std::size_t c = 0; c < 3; ++c) db[c] += (std::exp(z[c] - mx) / sum - (c == y ? 1.0 : 0.0)) / n;
        for (int j = 0; j < 2; ++j) {
            double r = params[static_cast<std::size_t>(rb.offset + j)];
            for (int k = 0; k < 4; ++k)
                r += params[static_cast<std::size_t>(rw.offset + j * 4 + k)] * x[static_cast<std::size_t>(i * 4 + k)];
            const double d = r - t[static_cast<std::size_t>(i * 2 + j)];
            mse += d * d / (2.0 * n);
            drb[static_cast<std::size_t>(j)] += 0.5 * 2.0 * d / (2.0 * n);
        }
    }
    CHECK(loss == Approx(ce + 0.5 * mse).epsilon(1e-5));
    for (std::size_t c = 0; c < 3; ++c)
        CHECK(grads[static_cast<std::size_t>(b.offset) + c] == Approx(db[c]).margin(1e-6));
    for (std::size_t j = 0; j < 2; ++j)
        CHECK(grads[static_cast<std::size_t>(rb.offset) + j] == Approx(drb[j]).margin(1e-6));

    // Forward only: the loss again, predictions and probabilities from the head.
    CHECK(network.forward(false) == Approx(loss).epsilon(1e-6));
    REQUIRE(network.outputs().size() == static_cast<std::size_t>(n * 3));
    REQUIRE(network.predictions().size() == static_cast<std::size_t>(n));
    std::vector<float> probs(static_cast<std::size_t>(n * 3));
    network.probabilities(probs);
    for (std::int64_t i = 0; i < n; ++i) {
        const float* row = probs.data() + i * 3;
        CHECK(row[0] + row[1] + row[2] == Approx(1.0f).epsilon(1e-5));
        const auto best = static_cast<std::int32_t>(std::max_element(row, row + 3) - row);
        CHECK(network.predictions()[static_cast<std::size_t>(i)] == best);
    }
}

namespace {

// Two heads as torch.onnx writes them: x [N, 4] -> dense "trunk" 5, tanh -> dense "logits" 3
// (softmax_cross_entropy_loss with y [N]) and dense "tag_logits" 2 in a binary cross-entropy
// against tags [N, 2] written out as F.binary_cross_entropy_with_logits exports:
// -mean(t log s + (1 - t) log(1 - s)), s = sigmoid(tag_logits); the loss ce + 0.5 bce.
json two_heads(json loss = {{"kind", "graph"}}) {
    json inputs = {{{"name", "x"}, {"dims", {4}}},
                   {{"name", "y"}, {"dims", json::array()}, {"type", "int"}},
                   {{"name", "tags"}, {"dims", {2}}}};
    json layers = {
        {{"kind", "dense"}, {"name", "trunk"}, {"inputs", {"x"}}, {"units", 5}},
        {{"kind", "tanh"}, {"name", "h"}},
        {{"kind", "dense"}, {"name", "logits"}, {"inputs", {"h"}}, {"units", 3}},
        {{"kind", "softmax_cross_entropy_loss"}, {"name", "ce"}, {"inputs", {"logits", "y"}}},
        {{"kind", "dense"}, {"name", "tag_logits"}, {"inputs", {"h"}}, {"units", 2}},
        {{"kind", "sigmoid"}, {"name", "s"}, {"inputs", {"tag_logits"}}},
        {{"kind", "log"}, {"name", "log_s"}, {"inputs", {"s"}}},
        {{"kind", "constant"}, {"name", "one"}, {"shape", json::array()}, {"values", {1.0}}},
        {{"kind", "sub"}, {"name", "one_minus_s"}, {"inputs", {"one", "s"}}},
        {{"kind", "log"}, {"name", "log_1s"}, {"inputs", {"one_minus_s"}}},
        {{"kind", "sub"}, {"name", "one_minus_t"}, {"inputs", {"one", "tags"}}},
        {{"kind", "mul"}, {"name", "pos"}, {"inputs", {"tags", "log_s"}}},
        {{"kind", "mul"}, {"name", "negs"}, {"inputs", {"one_minus_t", "log_1s"}}},
        {{"kind", "add"}, {"name", "sum"}, {"inputs", {"pos", "negs"}}},
        {{"kind", "neg"}, {"name", "terms"}, {"inputs", {"sum"}}},
        {{"kind", "reduce_mean"}, {"name", "bce"}, {"axes", {0, 1}}, {"keepdims", false}},
        {{"kind", "constant"}, {"name", "half"}, {"shape", json::array()}, {"values", {0.5}}},
        {{"kind", "mul"}, {"name", "weighted"}, {"inputs", {"bce", "half"}}},
        {{"kind", "add"}, {"name", "total"}, {"inputs", {"ce", "weighted"}}},
    };
    return {{"inputs", inputs}, {"layers", layers}, {"loss", loss}};
}

json head(const std::string& output, const std::string& kind, const std::string& targets) {
    return {{"output", output}, {"kind", kind}, {"targets", targets}};
}

}  // namespace

TEST_CASE("graph loss heads: found in the graph, softmax and sigmoid, in graph order", "[graph_loss][heads]") {
    const ModelDescription m = parse_ok(two_heads());
    REQUIRE(m.heads.size() == 2);
    CHECK(m.heads[0].value == "logits");
    CHECK(m.heads[0].kind == HeadKind::kSoftmax);
    CHECK(m.heads[0].target == "y");
    CHECK(m.heads[0].width == 3);
    CHECK(m.heads[1].value == "tag_logits");
    CHECK(m.heads[1].kind == HeadKind::kSigmoid);
    CHECK(m.heads[1].target == "tags");
    CHECK(m.heads[1].width == 2);
    CHECK_FALSE(m.heads_given);
    CHECK(m.head == "logits");
    CHECK(m.classes == 3);
    CHECK(m.head_index("tag_logits") == 1);
    // Found heads are not part of the canonical form (the hash of a model without "heads" is
    // what it was); found again on parsing it.
    CHECK_FALSE(canonical_architecture(m).at("loss").contains("heads"));
    const ModelDescription again = parse_ok(model_json(m));
    CHECK(again.heads.size() == 2);
    CHECK(architecture_hash(again) == architecture_hash(m));

    // The stable form softplus(X) - X * t is a sigmoid head too.
    json stable = classifier();
    stable["inputs"].push_back({{"name", "t"}, {"dims", {3}}});
    stable["layers"].push_back({{"kind", "softplus"}, {"name", "sp"}, {"inputs", {"logits"}}});
    stable["layers"].push_back({{"kind", "mul"}, {"name", "xt"}, {"inputs", {"logits", "t"}}});
    stable["layers"].push_back({{"kind", "sub"}, {"name", "d"}, {"inputs", {"sp", "xt"}}});
    stable["layers"].push_back({{"kind", "reduce_mean"}, {"name", "bce"}, {"axes", {0, 1}}, {"keepdims", false}});
    stable["layers"].push_back({{"kind", "add"}, {"name", "total"}, {"inputs", {"ce", "bce"}}});
    const ModelDescription s = parse_ok(stable);
    REQUIRE(s.heads.size() == 1);  // the same scores as softmax first: one head
    CHECK(s.heads[0].kind == HeadKind::kSoftmax);
    // A regression's prediction minus its float targets (MSE, L1, Huber) is a value head.
    const ModelDescription r = parse_ok(classifier(true));
    REQUIRE(r.heads.size() == 2);
    CHECK(r.heads[1].value == "reg");
    CHECK(r.heads[1].kind == HeadKind::kValue);
    CHECK(r.heads[1].target == "t");
    CHECK(r.heads[1].width == 2);
    CHECK(r.head == "logits");  // the softmax head stays the primary one
    CHECK(std::string(to_string(HeadKind::kValue)) == "value");
    // Named as a value head in the description; a value head's targets must be floats of its shape.
    json named = classifier(
        true,
        {{"kind", "graph"}, {"labels", "y"}, {"heads", {head("logits", "softmax", "y"), head("reg", "value", "t")}}});
    const ModelDescription v = parse_ok(named);
    REQUIRE(v.heads.size() == 2);
    CHECK(v.heads[1].kind == HeadKind::kValue);
    CHECK(parse_ok(model_json(v)).heads.at(1).kind == HeadKind::kValue);
    named["loss"]["heads"] = {head("logits", "softmax", "y"), head("reg", "value", "y")};
    CHECK_THAT(parse_error(named), Contains("a value head's targets are floats of its output's shape"));
}

TEST_CASE("graph loss heads: named in the description, checked, round-trip", "[graph_loss][heads]") {
    json given = two_heads({{"kind", "graph"},
                            {"labels", "y"},
                            {"heads", {head("tag_logits", "sigmoid", "tags"), head("logits", "softmax", "y")}}});
    const ModelDescription m = parse_ok(given);
    REQUIRE(m.heads.size() == 2);
    CHECK(m.heads_given);
    CHECK(m.heads[0].value == "tag_logits");  // the order given
    CHECK(m.heads[1].value == "logits");
    CHECK(m.head == "logits");
    const json canonical = canonical_architecture(m);
    CHECK(canonical.at("loss").at("heads").size() == 2);
    const ModelDescription again = parse_ok(model_json(m));
    CHECK(again.heads_given);
    CHECK(again.heads[0].value == "tag_logits");
    CHECK(architecture_hash(again) == architecture_hash(m));
    CHECK(architecture_hash(m) != architecture_hash(parse_ok(two_heads())));
    // Only the sigmoid head: the int label input then has no head to name its classes.
    json only_tags = two_heads({{"kind", "graph"}, {"heads", {head("tag_logits", "sigmoid", "tags")}}});
    CHECK_THAT(parse_error(only_tags), Contains("is the \"targets\" of no softmax head"));
}

TEST_CASE("graph loss heads: what does not fit is named, with the field", "[graph_loss][heads]") {
    auto with = [](json heads) { return two_heads({{"kind", "graph"}, {"heads", heads}}); };
    CHECK_THAT(parse_error(with(json::array({head("nope", "sigmoid", "tags")}))),
               Contains("model F: loss: field \"heads\": heads[0]: \"output\" \"nope\" is not a value of the model"));
    CHECK_THAT(
        parse_error(with(json::array({head("logits", "softmax", "y"), head("tag_logits", "sigmoid", "missing")}))),
        Contains("heads[1]: \"targets\" \"missing\" is not one of the model's inputs"));
    CHECK_THAT(parse_error(with(json::array({head("logits", "softmax", "x")}))), Contains("is the primary input"));
    CHECK_THAT(parse_error(with(json::array({head("logits", "softmax", "tags")}))),
               Contains("a softmax head's targets are int class labels"));
    CHECK_THAT(parse_error(with(json::array({head("logits", "softmax", "y"), head("logits", "sigmoid", "tags")}))),
               Contains("is already heads[0]"));
    // 3 logits against 2 tags.
    CHECK_THAT(parse_error(with(json::array({head("logits", "sigmoid", "tags")}))),
               Contains("a sigmoid head's targets are floats of its output's shape"));
    CHECK_THAT(parse_error(with(json::array({head("total", "softmax", "y")}))), Contains("a head is N x C floats"));
    CHECK_THAT(parse_error(with(json::array())), Contains("field \"heads\": expected a list of 1 to 64 heads"));
    CHECK_THAT(parse_error(with(json::array({{{"output", "logits"}, {"kind", "tanh"}, {"targets", "y"}}}))),
               Contains("heads[0]: field \"kind\""));
    CHECK_THAT(parse_error(with(json::array({{{"output", "logits"}, {"kind", "softmax"}}}))),
               Contains("heads[0]: field \"targets\": missing"));
    CHECK_THAT(
        parse_error(with(json::array({{{"output", "logits"}, {"kind", "softmax"}, {"targets", "y"}, {"w", 1}}}))),
        Contains("heads[0]"));
    // Heads belong to a graph loss.
    json builtin = classifier();
    builtin["loss"] = {{"kind", "softmax_cross_entropy"}, {"heads", json::array({head("logits", "softmax", "y")})}};
    CHECK_THAT(parse_error(builtin), Contains("heads"));
}

TEST_CASE("graph loss heads: the engine gives every head's scores", "[graph_loss][heads]") {
    const ModelDescription m = parse_ok(two_heads());
    const std::int64_t n = 3;
    std::vector<float> params = loss_model_parameters(m);
    NetworkOptions options;
    options.batch_size = n;
    options.forward_only = true;
    auto net = Network::create(m, options, params, {});
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    Network& network = **net;
    auto x = network.input(0);
    for (std::size_t k = 0; k < x.size(); ++k) x[k] = 0.4f * std::sin(0.9f * static_cast<float>(k));
    const std::vector<std::int32_t> labels = {2, 0, 1};
    std::copy(labels.begin(), labels.end(), network.labels().begin());
    auto tags = network.input(2);
    for (std::size_t k = 0; k < tags.size(); ++k) tags[k] = static_cast<float>(k % 2);
    const float loss = network.forward(false);

    // By hand: h = tanh(x W1^T + b1), logits, tag_logits; ce + 0.5 bce.
    auto dense = [&](const std::string& name, const std::vector<double>& in, int units) {
        const TensorDef& w = *m.tensor(name + "/w");
        const TensorDef& b = *m.tensor(name + "/b");
        std::vector<double> out(static_cast<std::size_t>(units));
        for (int u = 0; u < units; ++u) {
            double z = params[static_cast<std::size_t>(b.offset + u)];
            for (std::size_t k = 0; k < in.size(); ++k)
                z += params[static_cast<std::size_t>(w.offset) + static_cast<std::size_t>(u) * in.size() + k] * in[k];
            out[static_cast<std::size_t>(u)] = z;
        }
        return out;
    };
    double ce = 0, bce = 0;
    const auto scores = network.head_outputs(0), tag_scores = network.head_outputs(1);
    REQUIRE(scores.size() == static_cast<std::size_t>(n * 3));
    REQUIRE(tag_scores.size() == static_cast<std::size_t>(n * 2));
    for (std::int64_t i = 0; i < n; ++i) {
        std::vector<double> xi(x.begin() + i * 4, x.begin() + i * 4 + 4);
        auto h = dense("trunk", xi, 5);
        for (auto& v : h) v = std::tanh(v);
        const auto z = dense("logits", h, 3), g = dense("tag_logits", h, 2);
        for (std::size_t c = 0; c < 3; ++c)
            CHECK(scores[static_cast<std::size_t>(i * 3) + c] == Approx(z[c]).margin(1e-5));
        for (std::size_t c = 0; c < 2; ++c)
            CHECK(tag_scores[static_cast<std::size_t>(i * 2) + c] == Approx(g[c]).margin(1e-5));
        const double mx = std::max({z[0], z[1], z[2]});
        double sum = 0;
        for (double v : z) sum += std::exp(v - mx);
        ce += (std::log(sum) + mx - z[static_cast<std::size_t>(labels[static_cast<std::size_t>(i)])]) / n;
        for (std::size_t c = 0; c < 2; ++c) {
            const double t = tags[static_cast<std::size_t>(i * 2) + c], s = 1 / (1 + std::exp(-g[c]));
            bce -= (t * std::log(s) + (1 - t) * std::log(1 - s)) / (2.0 * n);
        }
    }
    CHECK(loss == Approx(ce + 0.5 * bce).epsilon(1e-5));
    // The primary head is the softmax one: outputs() are its scores.
    CHECK(std::vector<float>(network.outputs().begin(), network.outputs().end()) ==
          std::vector<float>(scores.begin(), scores.end()));
}
