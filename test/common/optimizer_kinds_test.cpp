// The optimizer kinds of issue 35 (nesterov, adam_torch, adamw) and --weight-decay against values
// computed by hand, step by step, for the gradient sequence 0.5, -0.25, 1.0 on a parameter that
// starts at 1 (the arithmetic is written out in each case, in float64; the kernels run in f32).
#include "common/optimizer.h"

#include <catch2/catch.hpp>
#include <vector>

using psrun::Optimizer;
using psrun::OptimizerConfig;
using psrun::OptimizerKind;
using psrun::WeightDecayOn;

namespace {

// The parameter after each of the three updates (one float, one tensor that decays if `decay`).
std::vector<float> three_steps(const OptimizerConfig& config, bool decay = true) {
    std::vector<float> p{1.0f}, out;
    Optimizer opt(config, 1);
    for (float g : {0.5f, -0.25f, 1.0f}) {
        std::vector<float> grad{g};
        opt.apply(p, grad, decay);
        out.push_back(p[0]);
    }
    return out;
}

void check_steps(const std::vector<float>& got, const std::vector<double>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(got[i] == Approx(want[i]).epsilon(2e-6));
}

}  // namespace

TEST_CASE("new optimizer names parse and print; their slots", "[optimizer]") {
    for (auto name : {"nesterov", "adam_torch", "adamw"}) {
        auto kind = psrun::parse_optimizer_kind(name);
        REQUIRE(kind);
        CHECK(psrun::to_string(*kind) == name);
    }
    CHECK(psrun::slot_count(OptimizerKind::kNesterov) == 1);
    CHECK(psrun::slot_count(OptimizerKind::kAdamTorch) == 2);
    CHECK(psrun::slot_count(OptimizerKind::kAdamW) == 2);
    CHECK(psrun::optimizer_form(OptimizerKind::kAdam) == "tf1 epsilon-hat");
    CHECK(psrun::optimizer_form(OptimizerKind::kAdamTorch) == "torch");
    auto on = psrun::parse_weight_decay_on("all");
    REQUIRE(on);
    CHECK(*on == WeightDecayOn::kAll);
    auto bad = psrun::parse_weight_decay_on("biases");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("biases") != std::string::npos);
}

TEST_CASE("weight decay applies by rank: matrices by default, every rank with 'all', none at 0", "[optimizer]") {
    OptimizerConfig c{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f, .weight_decay = 0.1f};
    CHECK(c.decays(2));
    CHECK(c.decays(4));
    CHECK_FALSE(c.decays(1));  // biases, BatchNorm scale and shift
    CHECK_FALSE(c.decays(0));
    c.weight_decay_on = WeightDecayOn::kAll;
    CHECK(c.decays(1));
    c.weight_decay = 0.0f;
    CHECK_FALSE(c.decays(2));
}

TEST_CASE("nesterov matches hand-computed values (torch SGD nesterov=True, TF use_nesterov)", "[optimizer]") {
    // buf = 0.9 buf + g; p -= 0.1 (g + 0.9 buf)
    // 1: buf = 0.5,  p = 1 - 0.1 (0.5 + 0.45)     = 0.905
    // 2: buf = 0.2,  p = 0.905 - 0.1 (-0.25 + 0.18) = 0.912
    // 3: buf = 1.18, p = 0.912 - 0.1 (1 + 1.062)    = 0.7058
    OptimizerConfig c{.kind = OptimizerKind::kNesterov, .learning_rate = 0.1f, .momentum = 0.9f};
    check_steps(three_steps(c), {0.905, 0.912, 0.7058});
    // Coupled decay 0.1: g' = g + 0.1 p.
    // 1: g' = 0.6, buf = 0.6, p = 1 - 0.1 (0.6 + 0.54) = 0.886
    // 2: g' = -0.25 + 0.0886 = -0.1614, buf = 0.54 - 0.1614 = 0.3786, p = 0.886 - 0.1 (-0.1614 + 0.34074) = 0.868066
    // 3: g' = 1.0868066, buf = 0.34074 + 1.0868066 = 1.4275466, p = 0.868066 - 0.1 (1.0868066 + 1.28479194) =
    // 0.630906146
    c.weight_decay = 0.1f;
    check_steps(three_steps(c), {0.886, 0.868066, 0.630906146});
    check_steps(three_steps(c, false), {0.905, 0.912, 0.7058});  // a tensor that does not decay
}

TEST_CASE("sgd with coupled weight decay matches hand-computed values", "[optimizer]") {
    // g' = g + 0.1 p; p -= 0.1 g'. 1: g' = 0.6, p = 0.94. 2: g' = -0.156, p = 0.9556.
    // 3: g' = 1.09556, p = 0.846044
    OptimizerConfig c{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f, .weight_decay = 0.1f};
    check_steps(three_steps(c), {0.94, 0.9556, 0.846044});
}

TEST_CASE("adam_torch adds epsilon to sqrt(v_hat); adam (TF 1.x) to sqrt(v)", "[optimizer]") {
    // A large epsilon (0.1) makes the two forms differ. torch: p -= lr/(1-b1^t) m / (sqrt(v)/sqrt(1-b2^t) + eps)
    // 1: m = 0.05, v = 0.00025: m_hat = 0.5, sqrt(v_hat) = 0.5: p = 1 - 0.1 * 0.5 / 0.6 = 0.916666667
    // 2: m = 0.02, v = 0.00031225; m_hat = 0.105263, sqrt(v_hat) = 0.395225: p = 0.895411060
    // 3: m = 0.118, v = 0.00131194; m_hat = 0.435424, sqrt(v_hat) = 0.661627: p = 0.838240766
    OptimizerConfig c{.kind = OptimizerKind::kAdamTorch, .learning_rate = 0.1f, .epsilon = 0.1f};
    check_steps(three_steps(c), {0.9166666667, 0.8954110602, 0.8382407659});
    // TF 1.x: lr_t = lr sqrt(1-b2^t)/(1-b1^t); p -= lr_t m / (sqrt(v) + eps)
    // 1: lr_t = 0.0316228, p = 1 - 0.0316228 * 0.05 / (0.0158114 + 0.1) = 0.986347294
    c.kind = OptimizerKind::kAdam;
    check_steps(three_steps(c), {0.9863472941, 0.9823477099, 0.9648487147});
}

TEST_CASE("adam_torch with coupled decay and adamw with decoupled decay match hand-computed values", "[optimizer]") {
    // adam_torch, weight_decay 0.5: g' = g + 0.5 p. 1: g' = 1.0, step = 0.1 * 1 / (1 + 1e-8): p = 0.900000001
    OptimizerConfig c{.kind = OptimizerKind::kAdamTorch, .learning_rate = 0.1f, .weight_decay = 0.5f};
    check_steps(three_steps(c), {0.900000001, 0.8196959042, 0.7315606208});
    // adamw: p *= 1 - 0.1 * 0.5 first, then Adam on g alone.
    // 1: p = 0.95, m_hat = 0.5, sqrt(v_hat) = 0.5: p = 0.95 - 0.1 = 0.85
    // 2: p = 0.8075; m = 0.02, v = 0.00031225: p = 0.8075 - 0.1 * 0.105263 / 0.395225 = 0.780866297
    c.kind = OptimizerKind::kAdamW;
    check_steps(three_steps(c), {0.850000002, 0.7808662986, 0.6760118246});
    // Without decay on this tensor, adamw is adam_torch.
    OptimizerConfig torch{.kind = OptimizerKind::kAdamTorch, .learning_rate = 0.1f};
    CHECK(three_steps(c, false) == three_steps(torch));
}

TEST_CASE("adam (TF 1.x) with coupled weight decay matches hand-computed values", "[optimizer]") {
    // g' = g + 0.5 p; 1: g' = 1, m = 0.1, v = 0.001, lr_t = 0.1 sqrt(0.001) / 0.1: p = 1 - 0.1 = 0.9000000316
    OptimizerConfig c{.kind = OptimizerKind::kAdam, .learning_rate = 0.1f, .weight_decay = 0.5f};
    check_steps(three_steps(c), {0.9000000316, 0.8196959578, 0.7315606892});
}

TEST_CASE("adam (TF 1.x) with beta1 0.5, beta2 0.9, epsilon 1e-3 (--beta1, --beta2, --epsilon) by hand",
          "[optimizer]") {
    // m = 0.5 m + 0.5 g, v = 0.9 v + 0.1 g^2, lr_t = 0.1 sqrt(1 - 0.9^t) / (1 - 0.5^t), p -= lr_t m / (sqrt(v) + 1e-3)
    // 1: m = 0.25, v = 0.025, lr_t = 0.1 sqrt(0.1) / 0.5 = 0.0632456: p = 1 - 0.0632456 * 0.25 / 0.159114 = 0.900628481
    // 2: m = 0.5 * 0.25 - 0.125 = 0: p stays (with the default beta1 0.9 it would move)
    // 3: m = 0.5, v = 0.125875, lr_t = 0.0594945: p = 0.900628481 - 0.0594945 * 0.5 / 0.355789 = 0.817019201
    OptimizerConfig c;
    c.kind = OptimizerKind::kAdam;
    c.learning_rate = 0.1f;
    c.beta1 = 0.5f;
    c.beta2 = 0.9f;
    c.epsilon = 1e-3f;
    check_steps(three_steps(c), {0.9006284807, 0.9006284807, 0.8170192007});
}
