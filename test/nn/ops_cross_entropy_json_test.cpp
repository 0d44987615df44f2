// softmax_cross_entropy_loss and nll_loss in the JSON description (workerd/nn/ops/cross_entropy.cpp):
// the canonical form (defaults explicit, ignore_index only when given), the loss's shapes and
// FLOPs, the architecture hash, and the parse errors, each naming what does not fit.
#include <catch2/catch.hpp>

#include <string>

#include "test/nn/cross_entropy_test_util.h"
#include "test/nn/ops_test_util.h"
#include "workerd/nn/model_summary.h"

namespace psrun::nn::test {
namespace {

using Catch::Contains;
using nlohmann::json;

std::string parse_error(const json& doc) {
    auto model = parse_model(doc, "t.json");
    REQUIRE_FALSE(model);
    CHECK(model.error().code == ErrorCode::kInvalidArgument);
    return model.error().message;
}

TEST_CASE("cross-entropy's JSON form: defaults explicit, ignore_index only when given; shapes", "[cross_entropy]") {
    LossSpec s;
    json doc = loss_document(s, {5, 7}, {7});
    doc["layers"][2].erase("reduction");
    doc["layers"][2].erase("label_smoothing");
    auto m = parse_ok(doc);
    const Node& sce = m.nodes[2];
    CHECK(sce.attrs == json({{"reduction", "mean"}, {"label_smoothing", 0.0}}));
    CHECK(m.value("loss").dims.empty());
    CHECK(m.value("loss").type == ElementType::kFloat);
    CHECK(sce.flops == 4.0 * 35);
    // Canonical form parses back to the same architecture.
    CHECK(architecture_hash(parse_ok(model_json(m))) == architecture_hash(m));

    LossSpec none{"nll_loss", "none", -100};
    m = parse_ok(loss_document(none, {5, 7}, {7}));
    CHECK(m.nodes[2].attrs == json({{"reduction", "none"}, {"ignore_index", -100}}));
    CHECK(m.value("loss").dims == Dims{Dim::batch_times(1), Dim::of(7)});
    CHECK(architecture_hash(parse_ok(model_json(m))) == architecture_hash(m));
    // ignore_index changes the architecture; its absence is not ignore_index -100.
    LossSpec plain{"nll_loss", "none"};
    CHECK(architecture_hash(parse_ok(loss_document(plain, {5, 7}, {7}))) != architecture_hash(m));
}

TEST_CASE("cross-entropy's errors say what does not fit", "[cross_entropy]") {
    LossSpec s;
    // Labels of the wrong shape.
    CHECK_THAT(parse_error(loss_document(s, {5, 7}, {6})),
               Contains("the labels (y) are N x 6 but the scores N x 5 x 7 need N x 7 (their dims without axis 1"));
    // Float labels.
    json doc = loss_document(s, {5}, {});
    doc["inputs"][1]["type"] = "float";
    CHECK_THAT(parse_error(doc), Contains("input 1 (y) must hold integer class ids, got floats N"));
    // Weights of another size.
    LossSpec w = s;
    w.weights = {1.0f, 2.0f};
    CHECK_THAT(parse_error(loss_document(w, {5}, {})), Contains("the class weights) must be floats [5], got float 2"));
    // Scores of rank 1.
    doc = loss_document(s, {5}, {});
    doc["layers"][0] = {
        {"kind", "reduce_sum"}, {"name", "scores"}, {"inputs", {"x"}}, {"axes", {1}}, {"keepdims", false}};
    CHECK_THAT(parse_error(doc), Contains("must be [R, C] or [R, C, d1, ...], got N"));
    // Fields.
    doc = loss_document(s, {5}, {});
    doc["layers"][2]["label_smoothing"] = 1.0;
    CHECK_THAT(parse_error(doc), Contains("expected a number in [0, 1)"));
    doc["layers"][2]["label_smoothing"] = 0.0;
    doc["layers"][2]["reduction"] = "avg";
    CHECK_THAT(parse_error(doc), Contains("expected one of mean, sum, none"));
    LossSpec nll{"nll_loss"};
    doc = loss_document(nll, {5}, {});
    doc["layers"][2]["label_smoothing"] = 0.1;
    CHECK_THAT(parse_error(doc), Contains("label_smoothing"));
    // One input.
    doc = loss_document(s, {5}, {});
    doc["layers"][2]["inputs"] = {"scores"};
    parse_error(doc);
}

}  // namespace
}  // namespace psrun::nn::test
