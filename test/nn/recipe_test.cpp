// nn::Recipe (workerd/nn/recipe.h): the fields that mirror the training flags (issue 35's recipe
// file) read, written back only when set, and each checked as its flag is; a recipe file's two
// forms, its size limit and its JSON syntax errors; a model's recipe without the new fields keeps
// its JSON (so its architecture hash and canonical description do not move).
#include <catch2/catch.hpp>

#include <string>
#include <utility>
#include <vector>

#include "workerd/nn/model_description.h"
#include "workerd/nn/model_summary.h"
#include "workerd/nn/recipe.h"
#include "workerd/nn/zoo.h"

using namespace psrun::nn;
using Catch::Contains;
using nlohmann::json;

namespace {

std::string error_of(const json& recipe) {
    auto parsed = parse_recipe(recipe, "R");
    REQUIRE_FALSE(parsed);
    return parsed.error().message;
}

const json kFull = {{"optimizer", "adamw"},
                    {"learning_rate", 0.001},
                    {"batch_size", 64},
                    {"global_batch_size", 128},
                    {"accumulate_steps", 2},
                    {"steps", 5000},
                    {"lr_schedule", "cosine:steps=5000,alpha=0.01"},
                    {"lr_warmup_steps", 200},
                    {"weight_decay", 0.05},
                    {"weight_decay_on", "all"},
                    {"beta1", 0.9},
                    {"beta2", 0.95},
                    {"epsilon", 1e-6},
                    {"label_smoothing", 0.1},
                    {"clip_global_norm", 1.0},
                    {"ema_decay", 0.999},
                    {"param_groups", {"*/b:lr_mult=0", "fc2/*:lr_mult=2,weight_decay=0.001"}}};

}  // namespace

TEST_CASE("recipe: every new field read, written back as given, and round-tripped") {
    auto r = parse_recipe(kFull, "R");
    REQUIRE(r);
    CHECK(r->lr_schedule == "cosine:steps=5000,alpha=0.01");
    CHECK(r->lr_warmup_steps == 200);
    CHECK(r->clip_global_norm == 1.0);
    CHECK(r->weight_decay_on == "all");
    CHECK(r->param_groups == std::vector<std::string>{"*/b:lr_mult=0", "fc2/*:lr_mult=2,weight_decay=0.001"});
    CHECK(r->ema_decay == 0.999);
    CHECK(r->accumulate_steps == 2);
    CHECK(r->global_batch_size == 128);
    CHECK(to_json(*r) == kFull);
    auto again = parse_recipe(to_json(*r), "again");
    REQUIRE(again);
    CHECK(*again == *r);
    CHECK_THAT(to_string(*r), Contains("lr_schedule cosine:steps=5000,alpha=0.01") && Contains("ema_decay 0.999") &&
                                  Contains("global_batch_size 128") && Contains("weight_decay_on all") &&
                                  Contains("param_groups [*/b:lr_mult=0 fc2/*:lr_mult=2,weight_decay=0.001]"));
    // Zero where the flag allows it (off), and an empty group list (no groups) are kept.
    auto off = parse_recipe(
        json{{"clip_global_norm", 0}, {"ema_decay", 0}, {"lr_warmup_steps", 0}, {"param_groups", json::array()}}, "R");
    REQUIRE(off);
    CHECK(off->clip_global_norm == 0.0);
    CHECK(off->param_groups == std::vector<std::string>{});
    CHECK(to_json(*off)["param_groups"] == json::array());
}

TEST_CASE("recipe: a recipe without the new fields writes what it always wrote") {
    const json old = {{"optimizer", "sgd"}, {"learning_rate", 0.5}, {"batch_size", 100}, {"steps", 1000}};
    auto r = parse_recipe(old, "R");
    REQUIRE(r);
    CHECK(to_json(*r) == old);
    CHECK(to_json(Recipe{}) == json::object());
    // The zoo's recipes come back as their files have them, and the hash ignores recipes.
    for (const auto& builtin : builtin_models()) {
        auto model = load_model(builtin.name);
        REQUIRE(model);
        if (!model->recipe) continue;
        const json written = to_json(*model->recipe);
        CHECK(written == json::parse(builtin.json)["recipe"]);
        for (const char* field : {"lr_schedule", "lr_warmup_steps", "clip_global_norm", "weight_decay_on",
                                  "param_groups", "ema_decay", "accumulate_steps", "global_batch_size"})
            CHECK_FALSE(written.contains(field));
        auto with_new = *model;
        with_new.recipe->ema_decay = 0.9;
        with_new.recipe->param_groups = std::vector<std::string>{"*:lr_mult=2"};
        CHECK(architecture_hash(with_new) == architecture_hash(*model));
    }
}

TEST_CASE("recipe: each new field is checked as its flag is, the error naming the field") {
    const std::vector<std::pair<json, std::string>> bad = {
        {{{"lr_schedule", "cosine"}}, "field \"lr_schedule\": cosine: steps is required"},
        {{{"lr_schedule", "linear:steps=5"}}, "field \"lr_schedule\""},
        {{{"lr_schedule", 5}}, "field \"lr_schedule\""},
        {{{"lr_warmup_steps", -1}}, "field \"lr_warmup_steps\""},
        {{{"lr_warmup_steps", 1.5}}, "field \"lr_warmup_steps\""},
        {{{"lr_warmup_steps", 2000000000000}}, "field \"lr_warmup_steps\""},
        {{{"clip_global_norm", -0.5}}, "field \"clip_global_norm\": expected a number in [0, 1e30]"},
        {{{"clip_global_norm", 1e31}}, "field \"clip_global_norm\""},
        {{{"clip_global_norm", "1"}}, "field \"clip_global_norm\""},
        {{{"weight_decay_on", "biases"}}, "field \"weight_decay_on\""},
        {{{"param_groups", "*/b:lr_mult=0"}}, "field \"param_groups\": expected a list"},
        {{{"param_groups", {"*/b:lr=2"}}}, "field \"param_groups\": item 0: --param-group '*/b:lr=2': unknown key"},
        {{{"param_groups", {"a:lr_mult=1", 3}}}, "field \"param_groups\": item 1: expected a string"},
        {{{"param_groups", {"fc1/w:lr_mult=-1"}}}, "field \"param_groups\": item 0"},
        {{{"ema_decay", 1}}, "field \"ema_decay\": expected a number in [0, 1)"},
        {{{"ema_decay", -0.1}}, "field \"ema_decay\""},
        {{{"accumulate_steps", 0}}, "field \"accumulate_steps\""},
        {{{"accumulate_steps", 4097}}, "field \"accumulate_steps\""},
        {{{"global_batch_size", 0}}, "field \"global_batch_size\""},
        {{{"global_batch_size", 65536LL * 4096 + 1}}, "field \"global_batch_size\""},
        // Together as their flags: the decay once, the warm-up once.
        {{{"lr_schedule", "cosine:steps=10"}, {"lr_decay", {{"rate", 0.5}, {"steps", 10}}}},
         "field \"lr_decay\": and lr_schedule cosine both set the decay"},
        {{{"lr_schedule", "cosine:steps=10,warmup=5"}, {"lr_warmup_steps", 3}},
         "field \"lr_warmup_steps\": 3 and lr_schedule's warmup=5 disagree"},
    };
    for (const auto& [recipe, message] : bad) {
        INFO(recipe.dump());
        std::string expected = "R: ";
        expected += message;
        CHECK_THAT(error_of(recipe), Contains(expected));
    }
    std::vector<json> groups;
    for (int i = 0; i < 65; ++i) {  // (not "g" + std::to_string(i): GCC 12's -Wrestrict false positive)
        std::string group = std::to_string(i);
        group += ":lr_mult=1";
        groups.push_back(group);
    }
    CHECK_THAT(error_of({{"param_groups", groups}}), Contains("at most 64 groups"));
    // What the flags accept together is accepted: the same warm-up twice, lr_decay beside constant.
    CHECK(parse_recipe({{"lr_schedule", "cosine:steps=10,warmup=5"}, {"lr_warmup_steps", 5}}, "R"));
    CHECK(parse_recipe({{"lr_schedule", "constant"}, {"lr_decay", {{"rate", 0.5}, {"steps", 10}}}}, "R"));
    CHECK(parse_recipe({{"lr_schedule", "cosine:steps=10"}, {"lr_decay", {{"rate", 1}, {"steps", 10}}}}, "R"));
}

TEST_CASE("recipe text: {\"recipe\": ...} or the bare object; size limit; syntax errors with line and column") {
    auto wrapped = parse_recipe_text(R"({"recipe": {"optimizer": "sgd", "ema_decay": 0.9}})", "--recipe F");
    REQUIRE(wrapped);
    CHECK(wrapped->ema_decay == 0.9);
    auto bare = parse_recipe_text(R"({"optimizer": "sgd", "ema_decay": 0.9})", "--recipe F");
    REQUIRE(bare);
    CHECK(*bare == *wrapped);
    auto error = [](std::string_view text) {
        auto r = parse_recipe_text(text, "--recipe F");
        REQUIRE_FALSE(r);
        return r.error().message;
    };
    CHECK_THAT(error(R"({"recipe": {"ema_decay": 2}})"), Contains("--recipe F: recipe: field \"ema_decay\""));
    CHECK_THAT(error(R"({"ema_decay": 2})"), Contains("--recipe F: field \"ema_decay\""));
    CHECK_THAT(error("{\"steps\": 3,\n  \"x\": }"), Contains("--recipe F: JSON syntax error at line 2, column 8"));
    CHECK_THAT(error("[1, 2]"), Contains("--recipe F: expected {\"recipe\": {...}} or a recipe object"));
    CHECK_THAT(error(R"({"recipe": {}, "layers": []})"), Contains("\"recipe\" beside other fields"));
    CHECK_THAT(error(R"({"recipe": 3})"), Contains("--recipe F: recipe: expected an object"));
    CHECK_THAT(error(R"({"learnig_rate": 0.1})"), Contains("did you mean \"learning_rate\""));
    CHECK_THAT(error(std::string(kMaxRecipeTextBytes + 1, ' ')), Contains("larger than 1048576 bytes"));
    CHECK_THAT(error("{\"steps\": 1e999}"), Contains("--recipe F"));
}

TEST_CASE("recipe: a model's recipe takes the new fields too (one grammar)") {
    const json doc = {{"input", {{"channels", 1}, {"height", 4}, {"width", 4}}},
                      {"classes", 3},
                      {"layers", {{{"kind", "dense"}, {"units", 3}}}},
                      {"recipe", {{"optimizer", "sgd"}, {"lr_schedule", "onecycle:total=100"}, {"ema_decay", 0.99}}}};
    auto m = parse_model(doc, "F");
    REQUIRE(m);
    REQUIRE(m->recipe);
    CHECK(m->recipe->lr_schedule == "onecycle:total=100");
    CHECK(model_json(*m)["recipe"] == doc["recipe"]);
    json bad = doc;
    bad["recipe"]["ema_decay"] = 1.0;
    auto refused = parse_model(bad, "F");
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Contains("model F: recipe: field \"ema_decay\""));
}
