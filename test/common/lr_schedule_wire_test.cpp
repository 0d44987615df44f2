// The learning-rate schedule in INIT/RESTORE bodies (common/wire.h) and in checkpoint manifests
// (common/checkpointer.h describe_optimizer/read_optimizer): round trips, hostile bodies, old records.
#include <catch2/catch.hpp>

#include <cstring>
#include <limits>

#include <nlohmann/json.hpp>

#include "common/checkpointer.h"
#include "common/lr_schedule.h"
#include "common/wire.h"

using namespace psrun;
using namespace psrun::wire;

namespace {

// Offsets in an INIT body: kind(1), 7 floats, decay_steps, start_step, last_step, then the schedule.
constexpr std::size_t kScheduleAt = 1 + 7 * 4 + 3 * 8;
constexpr std::size_t kKindFieldsAt = kScheduleAt + 1 + 8 + 4;

InitConfig with_schedule(std::string_view text) {
    InitConfig init;
    init.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 1e-3f};
    init.start_step = 10;
    init.last_step = 3000;
    auto s = parse_lr_schedule(text);
    REQUIRE(s);
    init.optimizer.schedule = *s;
    return init;
}

template <class T>
void poke(std::string& bytes, std::size_t at, T value) {
    REQUIRE(at + sizeof(T) <= bytes.size());
    std::memcpy(bytes.data() + at, &value, sizeof(T));
}

}  // namespace

TEST_CASE("INIT and RESTORE bodies carry every kind of schedule exactly", "[lr_schedule][wire]") {
    for (const char* text :
         {"constant", "constant:warmup=100,warmup_start=0.25", "exponential:rate=0.1,steps=5000",
          "piecewise:boundaries=1000,2000;values=1e-3,5e-4,1e-4", "cosine:steps=5000,alpha=0.01,warmup=50",
          "onecycle:total=3000,pct=0.25,div=25,final_div=1e4"}) {
        INFO(text);
        const InitConfig init = with_schedule(text);
        auto i = decode_init(encode_init(init));
        REQUIRE(i);
        CHECK(i->optimizer.schedule == init.optimizer.schedule);
        CHECK(i->start_step == 10);
        CHECK(i->last_step == 3000);
        auto r = decode_restore(encode_restore(RestoreRequest{init, "/m/ckpt-0000000010"}));
        REQUIRE(r);
        CHECK(r->init.optimizer.schedule == init.optimizer.schedule);
        CHECK(r->dir == "/m/ckpt-0000000010");
        const std::string body = encode_init(init);
        for (std::size_t n = 0; n < body.size(); ++n) CHECK_FALSE(decode_init(body.substr(0, n)));  // truncated
        CHECK_FALSE(decode_init(body + "x"));
    }
}

TEST_CASE("hostile schedules in INIT are refused, not applied", "[lr_schedule][wire]") {
    const std::string cosine = encode_init(with_schedule("cosine:steps=5000,alpha=0.01"));
    std::string b = cosine;
    poke<std::uint8_t>(b, kScheduleAt, 9);  // unknown kind
    CHECK_FALSE(decode_init(b));
    b = cosine;
    poke(b, kKindFieldsAt + 8, std::numeric_limits<float>::quiet_NaN());  // alpha
    CHECK_FALSE(decode_init(b));
    b = cosine;
    poke(b, kKindFieldsAt + 8, std::numeric_limits<float>::infinity());
    CHECK_FALSE(decode_init(b));
    b = cosine;
    poke<std::uint64_t>(b, kKindFieldsAt, 0);  // steps 0: a division by zero
    CHECK_FALSE(decode_init(b));
    b = cosine;
    poke<float>(b, kScheduleAt + 9, -1.0f);  // warmup_start
    CHECK_FALSE(decode_init(b));
    b = cosine;
    poke<std::uint64_t>(b, kScheduleAt + 1, ~0ull);  // warmup beyond any run
    CHECK_FALSE(decode_init(b));

    const std::string piecewise = encode_init(with_schedule("piecewise:boundaries=1000,2000;values=1e-3,5e-4,1e-4"));
    for (std::uint32_t count : {0u, 65u, 0xFFFFFFFFu}) {  // absurd counts fail before any allocation
        b = piecewise;
        poke(b, kKindFieldsAt, count);
        CHECK_FALSE(decode_init(b));
    }
    b = piecewise;
    poke<std::uint64_t>(b, kKindFieldsAt + 4 + 8, 1000);  // boundaries 1000, 1000: not increasing
    CHECK_FALSE(decode_init(b));
    b = piecewise;
    poke(b, kKindFieldsAt + 4 + 16, -1e-3f);  // a negative rate
    CHECK_FALSE(decode_init(b));

    const std::string onecycle = encode_init(with_schedule("onecycle:total=3000"));
    b = onecycle;
    poke(b, kKindFieldsAt + 8, 1.0f);  // pct 1: no anneal phase
    CHECK_FALSE(decode_init(b));
    b = onecycle;
    poke<std::uint64_t>(b, kKindFieldsAt, 2);  // total 2: the rise would be shorter than 2 updates
    CHECK_FALSE(decode_init(b));

    // An exponential decay in the legacy fields and a schedule at once: ambiguous, refused.
    InitConfig both = with_schedule("cosine:steps=100");
    both.optimizer.decay_rate = 0.5f;
    both.optimizer.decay_steps = 10;
    CHECK_FALSE(decode_init(encode_init(both)));
    // A RESTORE whose schedule is hostile is refused too.
    std::string restore = encode_restore(RestoreRequest{with_schedule("cosine:steps=5000"), "/m"});
    poke<std::uint64_t>(restore, kKindFieldsAt, 0);
    CHECK_FALSE(decode_restore(restore));
}

TEST_CASE("checkpoint manifests record the schedule and read back; old ones read as exponential",
          "[lr_schedule][checkpoint]") {
    for (const char* text : {"constant", "piecewise:boundaries=1000,2000;values=1e-3,5e-4,1e-4",
                             "cosine:steps=5000,alpha=0.01,warmup=50", "onecycle:total=3000,pct=0.25"}) {
        INFO(text);
        const InitConfig init = with_schedule(text);
        const nlohmann::json record = describe_optimizer(init);
        CHECK(record["lr_schedule"]["kind"] == std::string(to_string(init.optimizer.schedule.kind)));
        auto back = read_optimizer(nlohmann::json::parse(record.dump()));  // through the file's text
        REQUIRE(back);
        CHECK(back->optimizer.schedule == init.optimizer.schedule);
        CHECK(back->optimizer.learning_rate == init.optimizer.learning_rate);
        CHECK(back->last_step == init.last_step);
    }
    // A manifest written before schedules: no "lr_schedule"; decay_rate/decay_steps are the schedule.
    const auto old = nlohmann::json::parse(R"({"kind": "momentum", "learning_rate": 0.01, "momentum": 0.9,
        "beta1": 0.9, "beta2": 0.999, "epsilon": 1e-8, "adagrad_initial": 0.1, "decay_rate": 0.1,
        "decay_steps": 5000, "last_step": 5000})");
    auto legacy = read_optimizer(old);
    REQUIRE(legacy);
    CHECK(legacy->optimizer.kind == OptimizerKind::kMomentum);
    CHECK(legacy->optimizer.schedule == LrSchedule{});
    CHECK(legacy->optimizer.effective_schedule().to_string() == "exponential:rate=0.1,steps=5000");
    CHECK(legacy->optimizer.rate_at(5001) == Approx(0.001));
    auto constant = old;
    constant["decay_rate"] = 1.0;
    constant["decay_steps"] = 0;
    REQUIRE(read_optimizer(constant));
    CHECK(read_optimizer(constant)->optimizer.effective_schedule().to_string() == "constant");
    // Damaged records are errors naming the field.
    auto damaged = old;
    damaged["lr_schedule"] = {{"kind", "cosine"}, {"steps", -3}};
    REQUIRE_FALSE(read_optimizer(damaged));
    CHECK_THAT(read_optimizer(damaged).error().message, Catch::Contains("wrong type"));
    damaged["lr_schedule"] = {{"kind", "cosine"}, {"steps", 0}};
    CHECK_THAT(read_optimizer(damaged).error().message, Catch::Contains("steps must be in 1.."));
    damaged["lr_schedule"] = {{"kind", "sawtooth"}};
    CHECK_THAT(read_optimizer(damaged).error().message, Catch::Contains("unknown kind 'sawtooth'"));
    damaged = old;
    damaged.erase("learning_rate");
    CHECK_THAT(read_optimizer(damaged).error().message, Catch::Contains("learning_rate is missing"));
}
