// Learning-rate schedules (common/lr_schedule.h): rates against hand-computed values, the
// --lr-schedule syntax and its errors, the INIT/RESTORE wire form, the checkpoint record.
#include "common/lr_schedule.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <limits>
#include <numbers>

#include <nlohmann/json.hpp>

#include "common/checkpointer.h"
#include "common/optimizer.h"
#include "common/wire.h"

using namespace psrun;

namespace {

LrSchedule parsed(std::string_view text) {
    auto s = parse_lr_schedule(text);
    INFO(text << ": " << (s ? std::string() : s.error().message));
    REQUIRE(s);
    return *s;
}

// The error message of a schedule text that must not parse.
std::string error_of(std::string_view text) {
    auto s = parse_lr_schedule(text);
    INFO(text);
    REQUIRE_FALSE(s);
    CHECK(s.error().code == ErrorCode::kInvalidArgument);
    return s.error().message;
}

}  // namespace

TEST_CASE("constant and exponential: the shorthand flags and the schedule give identical rates", "[lr_schedule]") {
    CHECK(parsed("constant").rate_at(0.1f, 1) == 0.1f);
    CHECK(parsed("constant").rate_at(0.1f, 1000000) == 0.1f);
    OptimizerConfig legacy{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f};
    legacy.decay_rate = 0.5f;
    legacy.decay_steps = 10;
    OptimizerConfig scheduled{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f};
    scheduled.schedule = parsed("exponential:rate=0.5,steps=10");
    CHECK(legacy.effective_schedule() == scheduled.schedule);
    CHECK(scheduled.effective_schedule().to_string() == "exponential:rate=0.5,steps=10");
    for (std::uint64_t t = 1; t <= 100; ++t) REQUIRE(legacy.rate_at(t) == scheduled.rate_at(t));  // bit-identical
    CHECK(scheduled.rate_at(11) == Approx(0.05));
    CHECK(scheduled.rate_at(6) == Approx(0.1 * std::sqrt(0.5)));
}

TEST_CASE("piecewise follows TF's piecewise_constant at and around its boundaries", "[lr_schedule]") {
    const auto s = parsed("piecewise:boundaries=10,20;values=1e-3,5e-4,1e-4");
    // Update t runs at global step t - 1: step <= 10 -> 1e-3, 10 < step <= 20 -> 5e-4, then 1e-4.
    CHECK(s.rate_at(1.0f, 1) == 1e-3f);
    CHECK(s.rate_at(1.0f, 11) == 1e-3f);
    CHECK(s.rate_at(1.0f, 12) == 5e-4f);
    CHECK(s.rate_at(1.0f, 21) == 5e-4f);
    CHECK(s.rate_at(1.0f, 22) == 1e-4f);
    CHECK(s.rate_at(1.0f, 1000000) == 1e-4f);
    CHECK(s.rate_at(7.0f, 1) == 1e-3f);  // the values are rates: --learning-rate is not used
    CHECK(parsed("piecewise:boundaries=10,20,values=1e-3,5e-4,1e-4") == s);  // ',' between fields works too
}

TEST_CASE("cosine follows TF's cosine_decay: lr at 0, the midpoint at half, alpha * lr from the end on",
          "[lr_schedule]") {
    const auto s = parsed("cosine:steps=100,alpha=0.01");
    CHECK(s.rate_at(0.1f, 1) == Approx(0.1));
    CHECK(s.rate_at(0.1f, 26) == Approx(0.0855017856687341));  // 0.1 * (0.99 * (1 + cos(pi/4)) / 2 + 0.01)
    CHECK(s.rate_at(0.1f, 51) == Approx(0.0505));              // 0.1 * (0.99 * 0.5 + 0.01)
    CHECK(s.rate_at(0.1f, 101) == Approx(0.001));
    CHECK(s.rate_at(0.1f, 5000) == Approx(0.001));
    CHECK(parsed("cosine:steps=100").rate_at(0.1f, 101) == 0.0f);  // alpha 0 by default
}

TEST_CASE("onecycle matches PyTorch OneCycleLR (cos) at start, peak, mid-anneal and end", "[lr_schedule]") {
    // max_lr 0.01, total_steps 100, pct_start 0.25, div_factor 25, final_div_factor 1e4: PyTorch's
    // phases end at steps 24 and 99; initial 4e-4, min 4e-8; cos_anneal(a, b, p) = b + (a-b)/2 (cos(pi p) + 1).
    const auto s = parsed("onecycle:total=100,pct=0.25,div=25,final_div=1e4");
    CHECK(s.rate_at(0.01f, 1) == Approx(4e-4));
    CHECK(s.rate_at(0.01f, 13) == Approx(0.0052));                // step 12: halfway up
    CHECK(s.rate_at(0.01f, 25) == Approx(0.01));                  // step 24: the peak
    CHECK(s.rate_at(0.01f, 62) == Approx(0.005104731680568388));  // step 61: pct 37/75 of the anneal
    CHECK(s.rate_at(0.01f, 100) == Approx(4e-8));
    CHECK(s.rate_at(0.01f, 1000) == Approx(4e-8));  // held at the floor (PyTorch refuses to go on)
    const auto defaults = parsed("onecycle:total=1000");
    CHECK(defaults.pct_start == 0.3f);
    CHECK(defaults.div_factor == 25.0f);
    CHECK(defaults.final_div_factor == 1e4f);
}

TEST_CASE("warm-up rises linearly to the schedule's first rate, then the schedule starts its clock", "[lr_schedule]") {
    auto s = parsed("constant:warmup=10");
    CHECK(s.rate_at(0.1f, 1) == Approx(0.01));  // warmup_start 0: lr / warmup on the first update
    CHECK(s.rate_at(0.1f, 5) == Approx(0.05));
    CHECK(s.rate_at(0.1f, 10) == Approx(0.1));
    CHECK(s.rate_at(0.1f, 11) == 0.1f);
    CHECK(parsed("constant:warmup=10,warmup_start=0.5").rate_at(0.1f, 1) == Approx(0.055));
    const auto c = parsed("cosine:steps=100,alpha=0.01,warmup=10");
    CHECK(c.rate_at(0.1f, 5) == Approx(0.05));
    CHECK(c.rate_at(0.1f, 11) == Approx(0.1));
    CHECK(c.rate_at(0.1f, 61) == Approx(0.0505));  // cosine's step 50
    // --lr-warmup-steps with the legacy decay flags: warm-up, then the exponential from update 1.
    OptimizerConfig o{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f};
    o.decay_rate = 0.5f;
    o.decay_steps = 10;
    auto flags = lr_schedule_from_flags("", 4, 0.5f, 10);
    REQUIRE(flags);
    o.schedule = *flags;
    CHECK(o.rate_at(2) == Approx(0.05));
    CHECK(o.rate_at(5) == Approx(0.1));
    CHECK(o.rate_at(15) == Approx(0.05));
    CHECK(o.effective_schedule().to_string() == "exponential:rate=0.5,steps=10,warmup=4");
}

TEST_CASE("to_string parses back to the same schedule", "[lr_schedule]") {
    for (const char* text :
         {"constant", "exponential:rate=0.1,steps=5000", "piecewise:boundaries=1000,2000;values=0.001,5e-04,1e-04",
          "cosine:steps=5000,alpha=0.01", "onecycle:total=3000,pct=0.25,div=25,final_div=10000",
          "cosine:steps=10,alpha=0,warmup=5,warmup_start=0.1", "piecewise:boundaries=5;values=1,2;warmup=3"}) {
        const auto s = parsed(text);
        CHECK(s.to_string() == text);
        CHECK(parsed(s.to_string()) == s);
    }
}

TEST_CASE("every bad --lr-schedule names the field and what is allowed", "[lr_schedule]") {
    CHECK_THAT(error_of("linear:steps=5"), Catch::Contains("unknown learning-rate schedule 'linear'") &&
                                               Catch::Contains("constant, exponential, piecewise, cosine, onecycle"));
    CHECK_THAT(error_of(""), Catch::Contains("unknown learning-rate schedule ''"));
    CHECK_THAT(error_of("cosine:steps=10,beta=2"), Catch::Contains("unknown field 'beta'") &&
                                                       Catch::Contains("allowed: alpha, steps, warmup, warmup_start"));
    CHECK_THAT(error_of("cosine:alpha=0.1"), Catch::Contains("steps is required"));
    CHECK_THAT(error_of("exponential:rate=0.5"), Catch::Contains("steps is required"));
    CHECK_THAT(error_of("cosine:steps=10,steps=20"), Catch::Contains("'steps' given twice"));
    CHECK_THAT(error_of("cosine:steps=ten"), Catch::Contains("steps='ten' is not a whole number"));
    CHECK_THAT(error_of("cosine:steps=1e4"), Catch::Contains("steps='1e4' is not a whole number"));
    CHECK_THAT(error_of("cosine:steps=10,alpha=x"), Catch::Contains("alpha='x' is not a finite number"));
    CHECK_THAT(error_of("cosine:steps=10,alpha=nan"), Catch::Contains("alpha='nan' is not a finite number"));
    CHECK_THAT(error_of("cosine:steps=10,20"), Catch::Contains("steps takes one value, got 2"));
    CHECK_THAT(error_of("cosine:10"), Catch::Contains("'10' is not FIELD=VALUE"));
    CHECK_THAT(error_of("cosine:steps=10,,alpha=0"), Catch::Contains("empty item"));
    CHECK_THAT(error_of("cosine:steps=10,"), Catch::Contains("empty item"));
    CHECK_THAT(error_of("cosine:"), Catch::Contains("nothing after ':'"));
    CHECK_THAT(error_of("cosine:steps="), Catch::Contains("steps has no value"));
    CHECK_THAT(error_of("cosine:steps=0"), Catch::Contains("steps must be in 1.."));
    CHECK_THAT(error_of("cosine:steps=10,alpha=2"), Catch::Contains("alpha must be in [0, 1]"));
    CHECK_THAT(error_of("exponential:rate=1.5,steps=10"), Catch::Contains("rate must be in (0, 1]"));
    CHECK_THAT(error_of("piecewise:boundaries=20,10;values=1,2,3"), Catch::Contains("strictly increasing"));
    CHECK_THAT(error_of("piecewise:boundaries=10,20;values=1,2"),
               Catch::Contains("one rate more than boundaries (3), got 2"));
    CHECK_THAT(error_of("piecewise:boundaries=10;values=1,0"), Catch::Contains("values must be finite rates > 0"));
    std::string many = "piecewise:boundaries=1";
    for (int i = 2; i <= 65; ++i) {
        many += ',';
        many += std::to_string(i);
    }
    CHECK_THAT(error_of(many + ";values=1"), Catch::Contains("boundaries must list 1..64 steps"));
    CHECK_THAT(error_of("onecycle:total=4,pct=0.25"), Catch::Contains("pct * total must be at least 2 updates"));
    CHECK_THAT(error_of("onecycle:total=100,pct=1"), Catch::Contains("pct must be in (0, 1)"));
    CHECK_THAT(error_of("onecycle:total=100,div=0.5"), Catch::Contains("div must be a finite number >= 1"));
    CHECK_THAT(error_of("onecycle:total=100,final_div=0"), Catch::Contains("final_div must be a finite number >= 1"));
    CHECK_THAT(error_of("constant:warmup_start=2"), Catch::Contains("warmup_start must be in [0, 1]"));
    CHECK_THAT(error_of("constant:warmup=99999999999999999999"), Catch::Contains("warmup='99999999999999999999'"));
}

TEST_CASE("the workerd flags combine into one schedule or a usage error", "[lr_schedule]") {
    auto plain = lr_schedule_from_flags("", 0, 1.0f, 0);
    REQUIRE(plain);
    CHECK(*plain == LrSchedule{});
    auto warm = lr_schedule_from_flags("cosine:steps=100", 20, 1.0f, 0);
    REQUIRE(warm);
    CHECK(warm->warmup_steps == 20);
    CHECK(lr_schedule_from_flags("cosine:steps=100,warmup=20", 20, 1.0f, 0));  // the same warm-up twice is fine
    auto disagree = lr_schedule_from_flags("cosine:steps=100,warmup=10", 20, 1.0f, 0);
    REQUIRE_FALSE(disagree);
    CHECK_THAT(disagree.error().message, Catch::Contains("--lr-warmup-steps 20 and --lr-schedule warmup=10 disagree"));
    auto both = lr_schedule_from_flags("cosine:steps=100", 0, 0.1f, 1000);
    REQUIRE_FALSE(both);
    CHECK_THAT(both.error().message, Catch::Contains("--lr-decay-rate/--lr-decay-steps both set the decay"));
    auto negative = lr_schedule_from_flags("", -1, 1.0f, 0);
    REQUIRE_FALSE(negative);
    CHECK_THAT(negative.error().message, Catch::Contains("--lr-warmup-steps must be in 0.."));
    auto bad = lr_schedule_from_flags("cosine", 0, 1.0f, 0);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::StartsWith("--lr-schedule cosine: steps is required"));
}
