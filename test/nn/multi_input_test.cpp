// Several inputs per model (issue 34): the JSON "inputs" list next to the single "input", the
// canonical form and hash (a single input hashes as format 1 wrote it), the errors (duplicate
// names, a layer reading an undeclared input, an unused input), and the engine fed by index:
// each input reaches the output, and dL/d(input) of every float input matches the loss's
// central differences.
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

// x [N, 3] and meta [N, 2] -> dense 4 each -> add -> tanh -> dense 3.
json two_inputs() {
    return {{"inputs", {{{"name", "x"}, {"dims", {3}}}, {{"name", "meta"}, {"dims", {2}}, {"type", "float"}}}},
            {"classes", 3},
            {"layers",
             {{{"kind", "dense"}, {"name", "fx"}, {"inputs", {"x"}}, {"units", 4}},
              {{"kind", "dense"}, {"name", "fm"}, {"inputs", {"meta"}}, {"units", 4}},
              {{"kind", "add"}, {"name", "sum"}, {"inputs", {"fx", "fm"}}},
              {{"kind", "tanh"}},
              {{"kind", "dense"}, {"name", "logits"}, {"units", 3}}}}};
}

// ids [N, 5] (int) and mask [N, 5] (float): embedding 8 x 4, times the unsqueezed mask, mean
// over the positions, dense 3.
json ids_and_mask() {
    return {{"inputs", {{{"name", "ids"}, {"dims", {5}}, {"type", "int"}}, {{"name", "mask"}, {"dims", {5}}}}},
            {"classes", 3},
            {"layers",
             {{{"kind", "embedding"}, {"name", "emb"}, {"inputs", {"ids"}}, {"vocabulary", 8}, {"dim", 4}},
              {{"kind", "unsqueeze"}, {"name", "mask3"}, {"inputs", {"mask"}}, {"axes", {2}}},
              {{"kind", "mul"}, {"name", "masked"}, {"inputs", {"emb", "mask3"}}},
              {{"kind", "reduce_mean"}, {"name", "pooled"}, {"axes", {1}}, {"keepdims", false}},
              {{"kind", "dense"}, {"name", "logits"}, {"units", 3}}}}};
}

std::vector<float> parameters(const ModelDescription& model) {
    std::vector<float> p(static_cast<std::size_t>(model.parameter_count));
    for (std::size_t i = 0; i < p.size(); ++i) p[i] = 0.3f * std::sin(0.7f * static_cast<float>(i) + 0.2f);
    return p;
}

// The network's float input `i` against the loss's central differences, element by element.
void check_input_gradient(Network& net, std::size_t i) {
    net.train_step(1);
    const std::vector<float> g(net.input_gradient(i).begin(), net.input_gradient(i).end());
    auto x = net.input(i);
    REQUIRE(g.size() == x.size());
    double worst = 0, scale = 1e-3;
    for (std::size_t k = 0; k < x.size(); ++k) {
        const float saved = x[k];
        const float eps = 1e-2f;
        x[k] = saved + eps;
        const double up = net.forward(true, 1);
        x[k] = saved - eps;
        const double down = net.forward(true, 1);
        x[k] = saved;
        worst = std::max(worst, std::abs((up - down) / (2 * eps) - g[k]));
        scale = std::max(scale, static_cast<double>(std::abs(g[k])));
    }
    INFO("input " << net.model().inputs[i].name << ": worst |fd - g| " << worst << " of " << scale);
    CHECK(worst / scale < 2e-2);
}

}  // namespace

TEST_CASE("inputs: a list of named inputs, the first primary, every one a value") {
    const ModelDescription m = parse_ok(two_inputs());
    REQUIRE(m.inputs.size() == 2);
    CHECK(m.multi_input());
    CHECK(m.input_name() == "x");
    CHECK(m.inputs[1].name == "meta");
    CHECK(m.input_index("meta") == 1);
    CHECK(m.input_index("nosuch") == -1);
    CHECK(to_string(m.value("meta").dims) == to_string(m.inputs[1].info.dims));
    CHECK(m.inputs[1].info.type == ElementType::kFloat);
    // The canonical form lists them; it parses back to the same hash.
    const json canonical = canonical_architecture(m);
    CHECK(canonical.contains("inputs"));
    CHECK_FALSE(canonical.contains("input"));
    CHECK(canonical["inputs"][1] == json({{"name", "meta"}, {"dims", {2}}, {"type", "float"}}));
    CHECK(architecture_hash(parse_ok(model_json(m))) == architecture_hash(m));
    // "shape" is the same field as "dims"; an image entry takes channels/height/width.
    json doc = two_inputs();
    doc["inputs"][0] = {{"name", "x"}, {"shape", {3}}};
    CHECK(architecture_hash(parse_ok(doc)) == architecture_hash(m));
    // The order of the inputs is the model's: swapping them is another architecture.
    doc = two_inputs();
    std::swap(doc["inputs"][0], doc["inputs"][1]);
    CHECK(architecture_hash(parse_ok(doc)) != architecture_hash(m));
}

TEST_CASE("inputs: one input written as a list is the single-input model, same hash as format 1") {
    json one = {
        {"input", {{"shape", {3}}, {"name", "x"}}}, {"classes", 3}, {"layers", {{{"kind", "dense"}, {"units", 3}}}}};
    json list = one;
    list.erase("input");
    list["inputs"] = {{{"name", "x"}, {"dims", {3}}, {"type", "float"}}};
    const ModelDescription a = parse_ok(one), b = parse_ok(list);
    CHECK_FALSE(b.multi_input());
    CHECK(architecture_hash(a) == architecture_hash(b));
    CHECK(canonical_architecture(b).contains("input"));
    CHECK_FALSE(canonical_architecture(b).contains("inputs"));
    // An image model in format 1: its canonical input is still {"channels", "height", "width"}.
    json image = {{"input", {{"channels", 1}, {"height", 4}, {"width", 4}}},
                  {"classes", 3},
                  {"layers", {{{"kind", "dense"}, {"units", 3}}}}};
    CHECK(canonical_architecture(parse_ok(image))["input"] == json({{"channels", 1}, {"height", 4}, {"width", 4}}));
}

TEST_CASE("inputs: errors name the input and say what to do") {
    json doc = two_inputs();
    doc["inputs"][1]["name"] = "x";
    CHECK_THAT(parse_error(doc), Contains("inputs[1]: input name \"x\" is already inputs[0]'s"));

    doc = two_inputs();
    doc["layers"][1]["inputs"] = {"metadata"};
    const std::string undeclared = parse_error(doc);
    CHECK_THAT(undeclared, Contains("layer 1 (dense \"fm\")"));
    CHECK_THAT(undeclared,
               Contains("\"metadata\" is not a value defined before this layer (the inputs \"x\", \"meta\""));

    doc = two_inputs();
    doc["inputs"].push_back({{"name", "spare"}, {"dims", {2}}});
    CHECK_THAT(parse_error(doc), Contains("input \"spare\" (inputs[2]) is read by no layer"));

    doc = two_inputs();
    doc["input"] = {{"shape", {3}}};
    CHECK_THAT(parse_error(doc), Contains("give \"input\" (one input) or \"inputs\" (a list), not both"));

    doc = two_inputs();
    doc["inputs"][0].erase("name");
    CHECK_THAT(parse_error(doc), Contains("inputs[0]"));
    CHECK_THAT(parse_error(doc), Contains("\"name\""));

    doc = two_inputs();
    doc["inputs"][0]["name"] = "bad name";
    CHECK_THAT(parse_error(doc), Contains("inputs[0]: field \"name\": expected 1 to 200 of"));

    doc = two_inputs();
    doc["inputs"][1]["dims"] = {0};
    CHECK_THAT(parse_error(doc), Contains("inputs[1]: field \"dims\": expected positive integers"));

    doc = two_inputs();
    doc["inputs"][1]["shape"] = {2};
    CHECK_THAT(parse_error(doc), Contains("give \"dims\" or \"shape\""));

    doc = two_inputs();
    doc["inputs"] = json::array();
    CHECK_THAT(parse_error(doc), Contains("field \"inputs\": expected a list of 1 to 64 inputs"));

    doc = two_inputs();
    doc["inputs"][1] = "meta";
    CHECK_THAT(parse_error(doc), Contains("inputs[1]: expected {\"name\""));

    doc = two_inputs();
    doc["layers"][0]["name"] = "meta";
    CHECK_THAT(parse_error(doc), Contains("name \"meta\" is already a value (a model input)"));
}

TEST_CASE("network: each input fed by index reaches the output; input gradients") {
    const ModelDescription m = parse_ok(two_inputs());
    const auto params = parameters(m);
    std::vector<float> grads(params.size());
    NetworkOptions options;
    options.batch_size = 4;
    options.input_gradient = true;
    auto net = Network::create(m, options, params, grads);
    REQUIRE(net);
    Network& n = **net;
    REQUIRE(n.input(0).size() == 4 * 3);
    REQUIRE(n.input(1).size() == 4 * 2);
    CHECK(n.input().data() == n.input(0).data());
    CHECK_THROWS_AS(n.input(2), std::out_of_range);
    for (std::size_t k = 0; k < n.input(0).size(); ++k) n.input(0)[k] = 0.1f * static_cast<float>(k % 5) - 0.2f;
    for (std::size_t k = 0; k < n.input(1).size(); ++k) n.input(1)[k] = 0.3f * static_cast<float>(k % 3) - 0.3f;
    for (std::size_t k = 0; k < 4; ++k) n.labels()[k] = static_cast<std::int32_t>(k % 3);
    n.forward(false);
    const std::vector<float> before(n.outputs().begin(), n.outputs().end());
    n.input(1)[2] += 1.0f;  // example 1's meta
    n.forward(false);
    const std::vector<float> after(n.outputs().begin(), n.outputs().end());
    CHECK(before[0] == after[0]);  // example 0 unchanged
    CHECK(before[3] != after[3]);  // example 1 moved
    n.input(1)[2] -= 1.0f;
    check_input_gradient(n, 0);
    check_input_gradient(n, 1);
}

TEST_CASE("network: int ids and a float mask, gradient to the mask only") {
    const ModelDescription m = parse_ok(ids_and_mask());
    const auto params = parameters(m);
    std::vector<float> grads(params.size());
    NetworkOptions options;
    options.batch_size = 3;
    options.input_gradient = true;
    auto net = Network::create(m, options, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    Network& n = **net;
    REQUIRE(n.input_ids(0).size() == 15);
    CHECK(n.input(0).empty());
    REQUIRE(n.input(1).size() == 15);
    CHECK(n.input_ids(1).empty());
    for (std::size_t k = 0; k < 15; ++k) {
        n.input_ids(0)[k] = static_cast<std::int32_t>((k * 3) % 8);
        n.input(1)[k] = k % 4 == 3 ? 0.0f : 1.0f;
    }
    for (std::size_t k = 0; k < 3; ++k) n.labels()[k] = static_cast<std::int32_t>(k);
    n.train_step(1);
    CHECK(n.input_gradient(0).empty());
    // A masked position's embedding has no effect on the output: its row's gradient is zero
    // where no unmasked position reads the same id.
    check_input_gradient(n, 1);
}
