#include "common/optimizer.h"

#include <xmmintrin.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <thread>
#include <vector>

#include "common/denormals.h"

using psrun::Optimizer;
using psrun::OptimizerConfig;
using psrun::OptimizerKind;

namespace {

std::vector<float> run_steps(OptimizerConfig config, int steps, float grad) {
    std::vector<float> params{1.0f, -2.0f};
    std::vector<float> grads{grad, -grad};
    Optimizer opt(config, params.size());
    for (int i = 0; i < steps; ++i) opt.apply(params, grads);
    return params;
}

}  // namespace

TEST_CASE("optimizer names parse and print", "[optimizer]") {
    for (auto name : {"sgd", "momentum", "adagrad", "adam"}) {
        auto kind = psrun::parse_optimizer_kind(name);
        REQUIRE(kind);
        CHECK(psrun::to_string(*kind) == name);
    }
    auto bad = psrun::parse_optimizer_kind("rmsprop");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("rmsprop") != std::string::npos);
}

TEST_CASE("sgd matches hand-computed values", "[optimizer]") {
    OptimizerConfig c{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f};
    auto p = run_steps(c, 1, 0.5f);
    CHECK(p[0] == Approx(0.95f));
    CHECK(p[1] == Approx(-1.95f));
}

TEST_CASE("momentum matches hand-computed values", "[optimizer]") {
    OptimizerConfig c{.kind = OptimizerKind::kMomentum, .learning_rate = 0.1f, .momentum = 0.9f};
    // a1 = 0.5, p1 = 0.95; a2 = 0.95, p2 = 0.855
    auto p = run_steps(c, 2, 0.5f);
    CHECK(p[0] == Approx(0.855f));
    CHECK(p[1] == Approx(-1.855f));
}

TEST_CASE("adagrad matches hand-computed values", "[optimizer]") {
    OptimizerConfig c{.kind = OptimizerKind::kAdagrad, .learning_rate = 0.1f};
    // accum = 0.1 + 0.25 = 0.35; p = 1 - 0.1 * 0.5 / sqrt(0.35) = 0.9154846
    auto p = run_steps(c, 1, 0.5f);
    CHECK(p[0] == Approx(0.9154846f).epsilon(1e-6));
    CHECK(p[1] == Approx(-1.9154846f).epsilon(1e-6));
}

TEST_CASE("adam matches hand-computed values and keeps its state", "[optimizer]") {
    OptimizerConfig c{.kind = OptimizerKind::kAdam, .learning_rate = 0.001f};
    std::vector<float> params{1.0f};
    std::vector<float> grads{0.5f};
    Optimizer opt(c, 1);
    // t=1: m=0.05, v=0.00025, lr_t=0.001*sqrt(0.001)/0.1 -> step of ~lr (0.001)
    opt.apply(params, grads);
    CHECK(params[0] == Approx(0.999f).epsilon(1e-6));
    // t=2: m=0.095, v=0.00049975, lr_t=0.001*sqrt(0.001999)/0.19 -> again ~lr
    opt.apply(params, grads);
    CHECK(params[0] == Approx(0.998f).epsilon(1e-6));
    auto slots = opt.slots();
    REQUIRE(slots.size() == 2);
    CHECK(slots[0][0] == Approx(0.095f));
    CHECK(slots[1][0] == Approx(0.00049975f).epsilon(1e-4));  // 0.999f is not exact
    CHECK(opt.updates() == 2);
    // A different gradient sign flips the direction of the next move.
    grads[0] = -10.0f;
    const float before = params[0];
    opt.apply(params, grads);
    CHECK(params[0] > before);
}

TEST_CASE("slot counts follow the optimizer kind", "[optimizer]") {
    CHECK(Optimizer({.kind = OptimizerKind::kSgd}, 4).slots().empty());
    CHECK(Optimizer({.kind = OptimizerKind::kMomentum}, 4).slots().size() == 1);
    auto adagrad = Optimizer({.kind = OptimizerKind::kAdagrad}, 4);
    REQUIRE(adagrad.slots().size() == 1);
    CHECK(adagrad.slots()[0][3] == Approx(0.1f));
}

TEST_CASE("with denormals flushed, Adam's decaying moments reach zero, not subnormals, on new threads too",
          "[optimizer]") {
    // A parameter whose gradient stays zero (a dead ReLU unit): m decays by beta1 every step and is
    // subnormal after ~700 steps without the flags, which makes x86 ~25x slower (common/denormals.h).
    auto run = [] {
        psrun::OptimizerConfig c;
        c.kind = psrun::OptimizerKind::kAdam;
        c.learning_rate = 1e-3f;
        psrun::Optimizer adam(c, 64);
        std::vector<float> p(64, 0.1f), g(64, 1e-3f), zero(64, 0.0f);
        adam.apply(p, g);
        int subnormal = 0;
        for (int step = 0; step < 900; ++step) {
            adam.apply(p, zero);
            for (auto s : adam.slots())
                for (float x : s) subnormal += std::fpclassify(x) == FP_SUBNORMAL;
        }
        return subnormal;
    };
    std::thread before_flag([&] { CHECK(run() > 0); });  // the unflushed behaviour this guards against
    before_flag.join();
    const unsigned saved = _mm_getcsr();
    psrun::flush_denormals_to_zero();
    CHECK(psrun::denormals_flushed());
    CHECK(run() == 0);
    int on_thread = -1;
    bool inherited = false;
    std::thread after([&] {
        inherited = psrun::denormals_flushed();
        on_thread = run();
    });
    after.join();
    CHECK(inherited);
    CHECK(on_thread == 0);
    _mm_setcsr(saved);  // leave the test process as it was
}

TEST_CASE("exponential learning-rate decay follows TF's exponential_decay and drives Adam's step", "[optimizer]") {
    OptimizerConfig c;
    c.kind = OptimizerKind::kSgd;
    c.learning_rate = 0.1f;
    CHECK(c.rate_at(1) == 0.1f);
    CHECK(c.rate_at(5000) == 0.1f);  // decay_steps 0: constant
    c.decay_rate = 0.5f;
    c.decay_steps = 10;
    CHECK(c.rate_at(1) == 0.1f);  // the first update uses the initial rate (global step 0)
    CHECK(c.rate_at(11) == Approx(0.05f));
    CHECK(c.rate_at(21) == Approx(0.025f));
    CHECK(c.rate_at(6) == Approx(0.1f * std::sqrt(0.5f)));  // continuous, not staircase
    // SGD: params -= rate_at(t) * g, update by update.
    Optimizer sgd(c, 1);
    std::vector<float> p{1.0f}, g{1.0f};
    float expected = 1.0f;
    for (std::uint64_t t = 1; t <= 25; ++t) {
        sgd.apply(p, g);
        expected -= c.rate_at(t);
        REQUIRE(p[0] == Approx(expected).epsilon(1e-6));
    }
    // Adam scales its step by the same rate.
    OptimizerConfig a;
    a.kind = OptimizerKind::kAdam;
    a.learning_rate = 1e-3f;
    OptimizerConfig decayed = a;
    decayed.decay_rate = 0.1f;
    decayed.decay_steps = 1;
    Optimizer plain(a, 1), fast(decayed, 1);
    std::vector<float> pp{0.0f}, pf{0.0f}, grad{0.5f};
    plain.apply(pp, grad);
    fast.apply(pf, grad);
    CHECK(pf[0] == pp[0]);  // update 1: same rate
    const float plain_before = pp[0], fast_before = pf[0];
    plain.apply(pp, grad);
    fast.apply(pf, grad);
    CHECK((pf[0] - fast_before) == Approx(0.1f * (pp[0] - plain_before)));
}
