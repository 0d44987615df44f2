// --param-group (issue 35): the parser's forms and refusals, the JSON the manifest keeps, the INIT
// body that carries the groups to psd, and which configuration each tensor resolves to.
// (Against torch.optim's parameter groups: test/common/optimizer_torch.py.)
#include "common/param_groups.h"

#include <catch2/catch.hpp>

#include "common/wire.h"

using namespace psrun;

TEST_CASE("--param-group values parse, print and round-trip through JSON", "[optimizer][groups]") {
    auto g = parse_param_group("*/b:lr_mult=0.5,weight_decay=0");
    REQUIRE(g);
    CHECK(g->pattern == "*/b");
    CHECK(g->lr_multiplier == 0.5f);
    CHECK(g->sets_weight_decay);
    CHECK(g->weight_decay == 0.0f);
    auto lr_only = parse_param_group("embedding*:lr_mult=10");
    REQUIRE(lr_only);
    CHECK_FALSE(lr_only->sets_weight_decay);
    auto decay_only = parse_param_group("bn?/scale:weight_decay=1e-4");
    REQUIRE(decay_only);
    CHECK(decay_only->lr_multiplier == 1.0f);
    CHECK(decay_only->weight_decay == 1e-4f);
    CHECK(*parse_param_group(to_string(*g)) == *g);
    const std::vector<ParamGroup> groups{*g, *lr_only, *decay_only};
    auto back = param_groups_from_json(to_json(groups));
    REQUIRE(back);
    CHECK(*back == groups);
}

TEST_CASE("bad --param-group values are refused naming the fault", "[optimizer][groups]") {
    for (const auto& [text, what] :
         std::vector<std::pair<std::string, std::string>>{{"fc1/w", "no ':'"},
                                                          {":lr_mult=2", "empty pattern"},
                                                          {"a:b:lr_mult=2", "holds ':'"},
                                                          {"fc1/w:", "no setting"},
                                                          {"fc1/w:lr_mult", "not KEY=VALUE"},
                                                          {"fc1/w:lr=2", "unknown key 'lr'"},
                                                          {"fc1/w:lr_mult=-1", "finite number >= 0"},
                                                          {"fc1/w:lr_mult=nan", "finite number >= 0"},
                                                          {"fc1/w:weight_decay=1e40", "finite number >= 0"},
                                                          {"fc1/w:lr_mult=2x", "finite number >= 0"},
                                                          {"fc1/w:lr_mult=1,lr_mult=2", "twice"},
                                                          {"fc1/w:lr_mult=1,", "trailing ','"}}) {
        auto g = parse_param_group(text);
        INFO(text);
        REQUIRE_FALSE(g);
        CHECK(g.error().code == ErrorCode::kInvalidArgument);
        CHECK_THAT(g.error().message, Catch::Contains(what) && Catch::Contains("--param-group"));
    }
    CHECK_FALSE(param_groups_from_json(nlohmann::json::parse(R"([{"pattern": "", "lr_multiplier": 1}])")));
    CHECK_FALSE(param_groups_from_json(nlohmann::json::parse(R"([{"pattern": "a", "lr_multiplier": -1}])")));
    CHECK_FALSE(param_groups_from_json(
        nlohmann::json::parse(R"([{"pattern": "a", "lr_multiplier": 1, "weight_decay": "x"}])")));
    CHECK_FALSE(param_groups_from_json(nlohmann::json::parse(R"({"pattern": "a"})")));
}

TEST_CASE("each tensor resolves to its first matching group, else decay by rank", "[optimizer][groups]") {
    OptimizerConfig c{.kind = OptimizerKind::kAdamW, .learning_rate = 0.01f, .weight_decay = 0.1f};
    c.groups = {*parse_param_group("*/b:weight_decay=0.5"), *parse_param_group("fc*:lr_mult=0.25"),
                *parse_param_group("fc1/b:lr_mult=9")};
    const auto w = c.for_tensor("fc1/w", 2), b = c.for_tensor("fc1/b", 1), s = c.for_tensor("bn/scale", 1),
               conv = c.for_tensor("conv/w", 4);
    CHECK(w.lr_multiplier == 0.25f);  // the second group
    CHECK(w.weight_decay == 0.1f);    // rank 2: --weight-decay
    CHECK(b.lr_multiplier == 1.0f);   // the first group wins over the later ones
    CHECK(b.weight_decay == 0.5f);    // a group's decay applies at rank 1 too
    CHECK(s.weight_decay == 0.0f);    // rank 1, no group: no decay
    CHECK(s.lr_multiplier == 1.0f);
    CHECK(conv.weight_decay == 0.1f);
    for (const auto& r : {w, b, s, conv}) {
        CHECK(r.groups.empty());
        CHECK(r.decays(1) == (r.weight_decay > 0.0f));  // resolved: the rank no longer matters
    }
    // The learning rate an update uses is the schedule's times the multiplier.
    std::vector<float> p{1.0f}, q{1.0f};
    OptimizerConfig sgd{.kind = OptimizerKind::kSgd, .learning_rate = 0.5f};
    sgd.groups = {*parse_param_group("x:lr_mult=0.25")};
    Optimizer(sgd.for_tensor("x", 1), 1).apply(p, std::vector<float>{2.0f});
    Optimizer(sgd.for_tensor("y", 1), 1).apply(q, std::vector<float>{2.0f});
    CHECK(p[0] == 1.0f - 0.5f * 0.25f * 2.0f);
    CHECK(q[0] == 1.0f - 0.5f * 2.0f);
}

TEST_CASE("INIT carries the groups and the moving average's decay; bad ones are refused", "[optimizer][groups][wire]") {
    wire::InitConfig init;
    init.optimizer.ema_decay = 0.999f;
    init.optimizer.groups = {*parse_param_group("*/b:lr_mult=0,weight_decay=0"), *parse_param_group("emb:lr_mult=3")};
    auto back = wire::decode_init(wire::encode_init(init));
    REQUIRE(back);
    CHECK(back->optimizer.groups == init.optimizer.groups);
    CHECK(back->optimizer.ema_decay == 0.999f);
    std::string body = wire::encode_init(init);
    CHECK_FALSE(wire::decode_init(body.substr(0, body.size() - 1)));  // truncated group
    init.optimizer.groups[1].lr_multiplier = -1.0f;
    CHECK_FALSE(wire::decode_init(wire::encode_init(init)));
    init.optimizer.groups.assign(wire::kMaxParamGroups + 1, *parse_param_group("a:lr_mult=1"));
    CHECK_FALSE(wire::decode_init(wire::encode_init(init)));
    init.optimizer.groups.clear();
    init.optimizer.ema_decay = 1.0f;
    CHECK_FALSE(wire::decode_init(wire::encode_init(init)));
}
