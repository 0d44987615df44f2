// parse_model: TF's shape rules on odd sizes and strides, defaults, the hash, and one test
// per class of bad description (each naming the layer and field).
#include <catch2/catch.hpp>

#include "test/nn/graph_test_helpers.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "workerd/nn/model_description.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/op_schema.h"

using namespace psrun::nn;
using namespace psrun::nn::test;
using Catch::Contains;
using nlohmann::json;

namespace {

// A model with `layers` on a C x H x W input, ending in dense 10 unless the layers already do.
json model_with(json layers, int c = 1, int h = 7, int w = 7) {
    if (layers.empty() || layers.back().value("kind", "") != "dense")
        layers.push_back({{"kind", "dense"}, {"units", 10}});
    return {{"input", {{"channels", c}, {"height", h}, {"width", w}}}, {"classes", 10}, {"layers", layers}};
}

}  // namespace

TEST_CASE("same padding: out = ceil(in/stride), TF's split with the extra at the end") {
    // 7x7, kernel 3 stride 2: out 4, total pad (4-1)*2+3-7 = 2 -> 1 and 1
    auto m =
        parse_ok(model_with({{{"kind", "conv2d"}, {"filters", 4}, {"kernel", 3}, {"stride", 2}, {"padding", "same"}}}));
    CHECK(out_shape(m.nodes[0]) == ActivationShape{4, 4, 4, false});
    CHECK(pads_of(m, 0) == Pads{1, 1, 1, 1});
    // 7x7, kernel [4, 2] stride [2, 3]: rows out 4, pad (3*2+4-7)=3 -> 1/2; cols out 3, pad (2*3+2-7)=1 -> 0/1
    m = parse_ok(model_with(
        {{{"kind", "conv2d"}, {"filters", 2}, {"kernel", {4, 2}}, {"stride", {2, 3}}, {"padding", "same"}}}));
    CHECK(out_shape(m.nodes[0]) == ActivationShape{2, 4, 3, false});
    CHECK(pads_of(m, 0) == Pads{1, 2, 0, 1});
    // max_pool 2/2 same on 5x5 (odd): out 3, pad 1 at the end only
    m = parse_ok(model_with({{{"kind", "max_pool"}, {"window", 2}, {"padding", "same"}}}, 3, 5, 5));
    CHECK(out_shape(m.nodes[0]) == ActivationShape{3, 3, 3, false});
    CHECK(pads_of(m, 0) == Pads{0, 1, 0, 1});
    CHECK(stride_of(m, 0) == Extent2{2, 2});  // stride defaults to the window
}

TEST_CASE("valid padding: out = ceil((in-k+1)/stride), no pads") {
    // 7: k3 s2 -> ceil(5/2) = 3; 8: k3 s2 -> ceil(6/2) = 3; 9: k3 s1 -> 7
    auto m = parse_ok(model_with({{{"kind", "conv2d"}, {"filters", 5}, {"kernel", 3}, {"stride", 2}}}, 2, 7, 8));
    CHECK(out_shape(m.nodes[0]) == ActivationShape{5, 3, 3, false});
    CHECK(pads_of(m, 0) == Pads{});
    CHECK(tensors_of(m, 0)[0].shape == std::vector<std::int64_t>{5, 2, 3, 3});  // oihw
    m = parse_ok(model_with({{{"kind", "avg_pool"}, {"window", 3}, {"stride", 1}}}, 1, 9, 9));
    CHECK(out_shape(m.nodes[0]) == ActivationShape{1, 7, 7, false});
    // pool 2/2 valid on 5x5 floors: 2x2 (the last row and column are dropped)
    m = parse_ok(model_with({{{"kind", "max_pool"}, {"window", 2}}}, 1, 5, 5));
    CHECK(out_shape(m.nodes[0]) == ActivationShape{1, 2, 2, false});
}

TEST_CASE("dense flattens an image; defaults; dropout rate; default names") {
    auto m = parse_ok(model_with({{{"kind", "conv2d"}, {"filters", 3}, {"kernel", 1}},
                                  {{"kind", "relu"}},
                                  {{"kind", "dropout"}, {"rate", 0.25}},
                                  {{"kind", "dense"}, {"units", 6}},
                                  {{"kind", "dense"}, {"units", 10}, {"bias", false}}},
                                 2, 5, 3));
    CHECK(m.nodes[0].name == "conv2d1");
    CHECK(m.nodes[1].name == "relu1");
    CHECK(m.nodes[3].name == "dense1");
    CHECK(m.nodes[4].name == "dense2");
    CHECK(m.nodes[2].attrs.at("keep_prob").get<double>() == 0.75);
    CHECK(init_of(m, 0, "w").kind == InitKind::kGlorotUniform);
    CHECK(init_of(m, 0, "b").kind == InitKind::kZeros);
    CHECK(tensors_of(m, 3)[0].shape == std::vector<std::int64_t>{6, 3 * 5 * 3});  // [units, H*W*C]
    CHECK(tensors_of(m, 4).size() == 1);
    CHECK(m.parameter_count == 2 * 3 + 3 + 45 * 6 + 6 + 6 * 10);
    CHECK(m.nodes[1].flops == 45.0);  // one per element
}

TEST_CASE("the architecture hash: canonical, blind to metadata and recipe, not to names") {
    json a = model_with({{{"kind", "conv2d"}, {"filters", 3}, {"kernel", 3}}});
    json b = model_with({{{"kind", "conv2d"},
                          {"filters", 3},
                          {"kernel", {3, 3}},
                          {"stride", 1},
                          {"padding", "valid"},
                          {"bias", true},
                          {"weight_init", "glorot_uniform"},
                          {"bias_init", {{"kind", "zeros"}}}}});
    b["description"] = "same thing, spelled out";
    b["recipe"] = {{"optimizer", "sgd"}, {"learning_rate", 0.1}};
    const auto hash = architecture_hash(parse_ok(a));
    CHECK(hash.size() == 64);
    CHECK(architecture_hash(parse_ok(b)) == hash);
    json c = a;
    c["layers"][0]["name"] = "first";
    CHECK(architecture_hash(parse_ok(c)) != hash);
    json d = a;
    d["layers"][0]["filters"] = 4;
    CHECK(architecture_hash(parse_ok(d)) != hash);
}

TEST_CASE("recipe fields, and bad ones") {
    json doc = model_with({});
    doc["recipe"] = {{"optimizer", "momentum"}, {"lr_decay", {{"rate", 0.9}, {"steps", 100}}}, {"steps", 5}};
    const auto m = parse_ok(doc);
    REQUIRE(m.recipe);
    CHECK(m.recipe->lr_decay_rate == 0.9);
    CHECK(m.recipe->lr_decay_steps == 100);
    CHECK_FALSE(m.recipe->batch_size);
    doc["recipe"] = {{"optimizer", "rmsprop"}};
    CHECK_THAT(parse_error(doc), Contains("model F: recipe: field \"optimizer\": unknown optimizer 'rmsprop'"));
    doc["recipe"] = {{"batch_sizes", 5}};
    CHECK_THAT(parse_error(doc), Contains("did you mean \"batch_size\""));
}

TEST_CASE("recipe optimizer hyperparameters, weight decay and label smoothing: read, written back, checked") {
    json doc = model_with({});
    doc["recipe"] = {{"optimizer", "adamw"}, {"beta1", 0.9},        {"beta2", 0.95},
                     {"epsilon", 1e-6},      {"weight_decay", 0.1}, {"label_smoothing", 0.1}};
    const auto m = parse_ok(doc);
    REQUIRE(m.recipe);
    CHECK(m.recipe->beta2 == 0.95);
    CHECK(m.recipe->epsilon == 1e-6);
    CHECK(m.recipe->weight_decay == 0.1);
    CHECK(m.recipe->label_smoothing == 0.1);
    CHECK_FALSE(m.recipe->momentum);
    CHECK(to_json(*m.recipe) == doc["recipe"]);
    CHECK_THAT(to_string(*m.recipe), Contains("beta2 0.95") && Contains("label_smoothing 0.1"));
    doc["recipe"] = {{"optimizer", "nesterov"}, {"momentum", 0.8}};
    CHECK(parse_ok(doc).recipe->momentum == 0.8);
    doc["recipe"] = {{"momentum", 0.8}};  // no optimizer named: the merge decides (train_options.cpp)
    CHECK(parse_ok(doc).recipe->momentum == 0.8);
    doc["recipe"] = {{"optimizer", "adam"}, {"momentum", 0.8}};
    CHECK_THAT(parse_error(doc), Contains("field \"momentum\": optimizer adam has no momentum"));
    doc["recipe"] = {{"optimizer", "sgd"}, {"epsilon", 1e-7}};
    CHECK_THAT(parse_error(doc), Contains("field \"epsilon\": optimizer sgd has no epsilon"));
    doc["recipe"] = {{"beta1", 1.0}};
    CHECK_THAT(parse_error(doc), Contains("field \"beta1\": expected a number in [0, 1), got 1"));
    doc["recipe"] = {{"epsilon", 0}};
    CHECK_THAT(parse_error(doc), Contains("field \"epsilon\": expected a number > 0"));
    doc["recipe"] = {{"weight_decay", -0.5}};
    CHECK_THAT(parse_error(doc), Contains("field \"weight_decay\": expected a number >= 0"));
    doc["recipe"] = {{"label_smoothing", 1}};
    CHECK_THAT(parse_error(doc), Contains("field \"label_smoothing\": expected a number in [0, 1)"));
}

TEST_CASE("error: a field of the wrong type or value") {
    CHECK(parse_error(model_with({{{"kind", "conv2d"}, {"filters", -3}, {"kernel", 3}}})) ==
          "model F: layer 0 (conv2d): field \"filters\": expected a positive integer, got -3");
    CHECK_THAT(parse_error(model_with({{{"kind", "conv2d"}, {"filters", "32"}, {"kernel", 3}}})),
               Contains("field \"filters\": expected a positive integer, got \"32\""));
    CHECK_THAT(parse_error(model_with({{{"kind", "max_pool"}, {"window", 2}, {"padding", "SAME"}}})),
               Contains("field \"padding\": expected one of valid, same, got \"SAME\""));
}

TEST_CASE("error: a missing field") {
    CHECK_THAT(parse_error(model_with({{{"kind", "conv2d"}, {"name", "c"}, {"filters", 3}}})),
               Contains("layer 0 (conv2d \"c\"): field \"kernel\": missing"));
    json doc = model_with({});
    doc.erase("classes");
    CHECK_THAT(parse_error(doc), Contains("model F: field \"classes\": missing"));
}

TEST_CASE("error: an unknown field names the closest known one") {
    CHECK_THAT(parse_error(model_with({{{"kind", "conv2d"}, {"filter", 3}, {"kernel", 3}}})),
               Contains("layer 0 (conv2d): unknown field \"filter\" (did you mean \"filters\"?"));
    CHECK_THAT(parse_error(model_with({{{"kind", "conv2d"}, {"filters", 3}, {"kernel", 3}, {"strides", 2}}})),
               Contains("layer 0 (conv2d): unknown field \"strides\" (did you mean \"stride\"?"));
    json doc = model_with({});
    doc["clases"] = 3;
    CHECK_THAT(parse_error(doc), Contains("unknown field \"clases\" (did you mean \"classes\"?"));
}

TEST_CASE("error: an unknown kind names the known kinds") {
    const auto message = parse_error(model_with({{{"kind", "maxpool"}, {"window", 2}}}));
    CHECK_THAT(message, Contains("layer 0: unknown kind \"maxpool\" (did you mean \"max_pool\"?"));
    // Every registered kind, sorted (kinds are added often: not a fixed list here).
    const auto known = message.find("known kinds: ");
    REQUIRE(known != std::string::npos);
    std::vector<std::string> kinds;
    std::stringstream list(message.substr(known + 13, message.find(')', known) - known - 13));
    for (std::string k; std::getline(list, k, ',');) kinds.push_back(k.substr(k.find_first_not_of(' ')));
    CHECK(std::is_sorted(kinds.begin(), kinds.end()));
    for (const char* k : {"avg_pool", "batch_norm", "conv2d", "dense", "layer_norm", "max_pool", "relu"})
        CHECK(std::count(kinds.begin(), kinds.end(), k) == 1);
}

TEST_CASE("error: a pool on a 1x1 input") {
    json layers = {{{"kind", "max_pool"}, {"name", "pool1"}, {"window", 2}},
                   {{"kind", "max_pool"}, {"name", "pool2"}, {"window", 2}},
                   {{"kind", "max_pool"}, {"name", "pool3"}, {"window", 2}},
                   {{"kind", "max_pool"}, {"name", "pool4"}, {"window", 2}, {"stride", 2}}};
    CHECK(parse_error(model_with(layers, 1, 8, 8)) ==
          "model F: layer 3 (max_pool \"pool4\"): window 2x2 stride 2 on a 1x1 input: the output would be empty");
}

TEST_CASE("error: a kernel larger than a valid input; a conv after a dense layer") {
    CHECK_THAT(parse_error(model_with({{{"kind", "conv2d"}, {"filters", 1}, {"kernel", 5}}}, 1, 4, 9)),
               Contains("layer 0 (conv2d): kernel 5x5 with padding valid on a 4x9 input"));
    CHECK_THAT(parse_error(model_with(
                   {{{"kind", "dense"}, {"units", 4}}, {{"kind", "conv2d"}, {"filters", 1}, {"kernel", 1}}})),
               Contains("layer 1 (conv2d): expects an image N x C x H x W input, got N x 4 flat features"));
}

TEST_CASE("error: dropout with both keep_prob and rate, or neither, or out of range") {
    CHECK_THAT(parse_error(model_with({{{"kind", "dropout"}, {"keep_prob", 0.5}, {"rate", 0.5}}})),
               Contains("layer 0 (dropout): field \"rate\": give either \"keep_prob\" or \"rate\", not both"));
    CHECK_THAT(parse_error(model_with({{{"kind", "dropout"}}})), Contains("field \"keep_prob\": missing"));
    CHECK_THAT(parse_error(model_with({{{"kind", "dropout"}, {"keep_prob", 0}}})),
               Contains("field \"keep_prob\": expected a number in (0, 1], got 0"));
}

TEST_CASE("error: dense with 0 units; logits that do not match the classes") {
    CHECK(parse_error(model_with({{{"kind", "dense"}, {"units", 0}}})) ==
          "model F: layer 0 (dense): field \"units\": expected a positive integer, got 0");
    CHECK_THAT(parse_error(model_with({{{"kind", "dense"}, {"units", 10}}, {{"kind", "dense"}, {"units", 3}}})),
               Contains("the last layer's output is N x 3; the loss needs the logits: N x 10"));
}

TEST_CASE("error: bad initializers") {
    CHECK_THAT(parse_error(model_with({{{"kind", "dense"}, {"units", 10}, {"weight_init", "xavier"}}})),
               Contains("layer 0 (dense): field \"weight_init\": unknown initializer \"xavier\""));
    CHECK_THAT(parse_error(model_with({{{"kind", "dense"}, {"units", 10}, {"weight_init", "truncated_normal"}}})),
               Contains("initializer truncated_normal needs \"stddev\""));
    CHECK_THAT(parse_error(model_with(
                   {{{"kind", "dense"}, {"units", 10}, {"weight_init", {{"kind", "normal"}, {"stddev", -1}}}}})),
               Contains("field \"stddev\": expected a positive number, got -1"));
    CHECK_THAT(parse_error(model_with({{{"kind", "dense"}, {"units", 10}, {"bias", false}, {"bias_init", "zeros"}}})),
               Contains("field \"bias_init\": given but \"bias\" is false"));
}

TEST_CASE("error: duplicate layer names, explicit or default") {
    CHECK_THAT(parse_error(model_with({{{"kind", "relu"}, {"name", "a"}}, {{"kind", "tanh"}, {"name", "a"}}})),
               Contains("layer 1 (tanh): name \"a\" is already layer 0's"));
    CHECK_THAT(parse_error(model_with({{{"kind", "relu"}}, {{"kind", "tanh"}, {"name", "relu1"}}})),
               Contains("name \"relu1\" is already layer 0's"));
    CHECK_THAT(parse_error(model_with({{{"kind", "relu"}, {"name", "a:b"}}})),
               Contains("layer 0 (relu): field \"name\": expected 1 to 200 of"));
}

TEST_CASE("error: JSON syntax errors name line and column") {
    auto model = parse_model_text("{\n  \"classes\": 10,\n  \"input\": {\"channels\": 1,, }\n}", "bad.json");
    REQUIRE_FALSE(model);
    CHECK_THAT(model.error().message, Contains("model bad.json: JSON syntax error at line 3, column 27"));
    CHECK_FALSE(parse_model_text("", "empty"));
    // Found by the fuzzer: nlohmann-json throws out_of_range, not parse_error, for this.
    auto overflow = parse_model_text("{\"classes\": 1e999}", "big.json");
    REQUIRE_FALSE(overflow);
    CHECK_THAT(overflow.error().message, Contains("model big.json: bad JSON: number overflow parsing '1e999'"));
    CHECK_FALSE(parse_model_text("[1, 2]", "array"));
}

TEST_CASE("error: absurd sizes are refused, not overflowed") {
    CHECK_THAT(parse_error(model_with({}, 65536, 65536, 65536)), Contains("more than 2^31-1 elements"));
    CHECK_THAT(parse_error(model_with({{{"kind", "conv2d"}, {"filters", 2147483647}, {"kernel", 1}}}, 1, 2, 2)),
               Contains("layer 0 (conv2d): the output would have more than 2^31-1 elements"));
    CHECK_THAT(
        parse_error(model_with({{{"kind", "dense"}, {"units", 100000}}, {{"kind", "dense"}, {"units", 100000}}})),
        Contains("tensor dense2/w would have more than 2^31-1 elements"));
    CHECK_THAT(parse_error(model_with({{{"kind", "conv2d"}, {"filters", 1}, {"kernel", 1e300}}})),
               Contains("field \"kernel\": expected a positive integer or [height, width]"));
    json many = json::array();
    for (int i = 0; i < 40; ++i) many.push_back({{"kind", "dense"}, {"units", 46340}});
    CHECK_THAT(parse_error(model_with(many)), Contains("the tensors add up to more than 2^31-1"));
}

// A causal attention mask holds -inf, which JSON cannot write: the description canonicalises a
// float constant's infinities to "inf"/"-inf", so its text form (checkpoints, exports) parses
// back. Before, -inf was dumped as null and the checkpoint of a trained GPT could not be read.
TEST_CASE("a float constant's infinities survive the description's text form") {
    json layers = {{{"kind", "constant"},
                    {"name", "mask"},
                    {"shape", {2, 2}},
                    {"values", {0.0, -std::numeric_limits<double>::infinity(), 1.5, "inf"}}},
                   {{"kind", "add"}, {"inputs", {"input", "mask"}}},
                   {{"kind", "flatten"}, {"axis", 1}}};
    json doc = {{"input", {{"shape", {2, 2}}}}, {"loss", {{"kind", "mean_squared_error"}}}, {"layers", layers}};
    const ModelDescription first = parse_ok(doc);
    const std::string text = model_json(first).dump();
    CHECK(text.find("null") == std::string::npos);
    auto again = parse_model_text(text, "T2");
    INFO((again ? std::string() : again.error().message));
    REQUIRE(again);
    const auto& values = again->nodes.front().attrs.at("values");
    REQUIRE(values.size() == 4);
    CHECK(values[0] == 0.0);
    CHECK(values[1] == "-inf");
    CHECK(values[2] == 1.5);
    CHECK(values[3] == "inf");
    CHECK(std::isinf(constant_float(values[1])));
    CHECK(constant_float(values[1]) < 0);
    json bad = doc;
    bad["layers"][0]["values"][1] = "nan";
    CHECK_THAT(parse_error(bad), Contains("expected numbers (or \"inf\", \"-inf\")"));
}
