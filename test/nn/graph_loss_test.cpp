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
    // A float input of no dims is refused (only int labels are [N]).
    json float_labels = classifier();
    float_labels["inputs"][1]["type"] = "float";
    CHECK_THAT(parse_error(float_labels), Contains("is for int inputs"));
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
                z[static_cast<std::size_t>(c)] += params[static_cast<std::size_t>(w.offset + c * 4 + k)] * x[static_cast<std::size_t>(i * 4 + k)];
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
    for (std::size_t c = 0; c < 3; ++c) CHECK(grads[static_cast<std::size_t>(b.offset) + c] == Approx(db[c]).margin(1e-6));
    for (std::size_t j = 0; j < 2; ++j) CHECK(grads[static_cast<std::size_t>(rb.offset) + j] == Approx(drb[j]).margin(1e-6));

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
