// --weight-decay, --weight-decay-on and --clip-global-norm on the wire (INIT) and in the
// checkpoint manifest (describe_optimizer/read_optimizer), old manifests included.
#include <catch2/catch.hpp>

#include <limits>
#include <nlohmann/json.hpp>

#include "common/checkpointer.h"
#include "common/wire.h"

using namespace psrun;

namespace {

wire::InitConfig adamw() {
    wire::InitConfig init;
    init.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdamW,
                                     .learning_rate = 3e-4f,
                                     .weight_decay = 0.1f,
                                     .weight_decay_on = WeightDecayOn::kAll,
                                     .clip_global_norm = 1.5f};
    init.last_step = 50;
    return init;
}

}  // namespace

TEST_CASE("INIT carries the new kinds, weight decay and clipping; bad values are refused", "[optimizer][wire]") {
    for (auto kind :
         {OptimizerKind::kNesterov, OptimizerKind::kAdamTorch, OptimizerKind::kAdamW, OptimizerKind::kLamb}) {
        auto init = adamw();
        init.optimizer.kind = kind;
        auto back = wire::decode_init(wire::encode_init(init));
        REQUIRE(back);
        CHECK(back->optimizer.kind == kind);
        CHECK(back->optimizer.weight_decay == 0.1f);
        CHECK(back->optimizer.weight_decay_on == WeightDecayOn::kAll);
        CHECK(back->optimizer.clip_global_norm == 1.5f);
    }
    for (float bad : {-0.1f, std::numeric_limits<float>::infinity(), std::numeric_limits<float>::quiet_NaN()}) {
        auto init = adamw();
        init.optimizer.weight_decay = bad;
        CHECK_FALSE(wire::decode_init(wire::encode_init(init)));
        init = adamw();
        init.optimizer.clip_global_norm = bad;
        CHECK_FALSE(wire::decode_init(wire::encode_init(init)));
    }
    auto bytes = wire::encode_init(adamw());
    bytes[0] = static_cast<char>(kMaxOptimizerKind + 1);  // no such kind
    CHECK_FALSE(wire::decode_init(bytes));
}

TEST_CASE("the manifest records weight decay and clipping; one written before them reads as none", "[optimizer]") {
    const auto record = describe_optimizer(adamw());
    CHECK(record["kind"] == "adamw");
    CHECK(record["weight_decay_on"] == "all");
    auto back = read_optimizer(nlohmann::json::parse(record.dump()));
    REQUIRE(back);
    CHECK(back->optimizer.kind == OptimizerKind::kAdamW);
    CHECK(back->optimizer.weight_decay == 0.1f);
    CHECK(back->optimizer.weight_decay_on == WeightDecayOn::kAll);
    CHECK(back->optimizer.clip_global_norm == 1.5f);
    auto old = record;
    old.erase("weight_decay");
    old.erase("weight_decay_on");
    old.erase("clip_global_norm");
    old["kind"] = "adam";
    auto legacy = read_optimizer(old);
    REQUIRE(legacy);
    CHECK(legacy->optimizer.weight_decay == 0.0f);
    CHECK(legacy->optimizer.weight_decay_on == WeightDecayOn::kMatrices);
    CHECK(legacy->optimizer.clip_global_norm == 0.0f);
    auto bad = record;
    bad["weight_decay"] = -1;
    CHECK_FALSE(read_optimizer(bad));
    bad = record;
    bad["weight_decay_on"] = "biases";
    CHECK_FALSE(read_optimizer(bad));
}

TEST_CASE("momentum, betas and epsilon (--momentum, --beta1, --beta2, --epsilon) travel in INIT and the manifest",
          "[optimizer]") {
    auto init = adamw();
    init.optimizer.momentum = 0.7f;
    init.optimizer.beta1 = 0.85f;
    init.optimizer.beta2 = 0.95f;
    init.optimizer.epsilon = 1e-6f;
    auto sent = wire::decode_init(wire::encode_init(init));
    REQUIRE(sent);
    auto recorded = read_optimizer(nlohmann::json::parse(describe_optimizer(init).dump()));
    REQUIRE(recorded);
    for (const OptimizerConfig& back : {sent->optimizer, recorded->optimizer}) {
        CHECK(back.momentum == 0.7f);
        CHECK(back.beta1 == 0.85f);
        CHECK(back.beta2 == 0.95f);
        CHECK(back.epsilon == 1e-6f);
    }
}
