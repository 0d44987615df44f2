// --optimizer lamb (common/lamb.h) against values computed by hand (in float64, the formula of
// common/lamb.h; the kernels run in f32 with f64 norms), its zero-norm cases, and its two-phase
// update split into parts on threads against the single-part update, bit for bit.
#include "common/optimizer.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <thread>
#include <vector>

#include "common/thread_team.h"

using psrun::Optimizer;
using psrun::OptimizerConfig;
using psrun::OptimizerKind;

namespace {

// The parameters after each update of a 2-float tensor starting at {1, -2}, one tensor that decays if `decay`.
std::vector<std::vector<float>> lamb_steps(const OptimizerConfig& config, std::vector<std::vector<float>> grads,
                                           std::vector<float> p = {1.0f, -2.0f}, bool decay = true) {
    std::vector<std::vector<float>> out;
    Optimizer opt(config, p.size());
    for (const auto& g : grads) {
        opt.apply(p, g, decay);
        out.push_back(p);
    }
    return out;
}

void check_lamb(const std::vector<std::vector<float>>& got, const std::vector<std::vector<double>>& want) {
    REQUIRE(got.size() == want.size());
    for (std::size_t s = 0; s < want.size(); ++s)
        for (std::size_t i = 0; i < want[s].size(); ++i) {
            INFO("update " << s + 1 << ", element " << i);
            CHECK(got[s][i] == Approx(want[s][i]).epsilon(2e-6));
        }
}

const std::vector<std::vector<float>> kGrads = {{0.5f, 0.25f}, {-0.25f, 1.0f}, {1.0f, -0.5f}};

std::vector<float> wave(std::size_t n, float scale, float phase) {
    std::vector<float> v(n);
    for (std::size_t i = 0; i < n; ++i) v[i] = scale * std::sin(0.37f * static_cast<float>(i % 1009) + phase);
    return v;
}

}  // namespace

TEST_CASE("lamb parses, prints, keeps m and v, reads the betas; its form", "[optimizer][lamb]") {
    auto kind = psrun::parse_optimizer_kind("lamb");
    REQUIRE(kind);
    CHECK(*kind == OptimizerKind::kLamb);
    CHECK(psrun::to_string(*kind) == "lamb");
    CHECK(psrun::optimizer_form(*kind) == "lamb (You et al.)");
    CHECK(psrun::slot_count(*kind) == 2);
    CHECK(psrun::uses_betas(*kind));
    CHECK_FALSE(psrun::uses_momentum(*kind));
    CHECK(static_cast<int>(*kind) == psrun::kMaxOptimizerKind);
    auto bad = psrun::parse_optimizer_kind("lars");
    REQUIRE_FALSE(bad);
    CHECK(bad.error().message.find("lamb") != std::string::npos);  // the list of names has it
}

TEST_CASE("lamb matches hand-computed values without and with weight decay", "[optimizer][lamb]") {
    // lr 0.1, b1 0.9, b2 0.999, eps 1e-8; p = {1, -2}, ||p|| = sqrt(5).
    // 1: m = 0.1 g, v = 0.001 g^2: m_hat = g, sqrt(v_hat) = |g|: r = g / (|g| + eps) = {1, 1} (to 1e-8);
    //    trust = sqrt(5) / sqrt(2) = 1.58113888, p = {1, -2} - 0.158113888 {1, 1} = {0.841886115, -2.158113881}
    // 2, 3: the same formula (trust 2.50810366, 3.38709969).
    OptimizerConfig c{.kind = OptimizerKind::kLamb, .learning_rate = 0.1f};
    check_lamb(lamb_steps(c, kGrads),
               {{0.8418861154, -2.1581138814}, {0.7750860267, -2.3799246695}, {0.5521770706, -2.4937648868}});
    // weight decay 0.1: 1: r = {1, 1} + 0.1 {1, -2} = {1.1, 0.8}, ||r|| = sqrt(1.85);
    //    trust = sqrt(5 / 1.85) = 1.64398992, p = {1 - 0.164398992 * 1.1, -2 - 0.164398992 * 0.8}
    //    = {0.819161112, -2.131519187}; 2, 3: trust 3.01975318, 3.31337731.
    c.weight_decay = 0.1f;
    check_lamb(lamb_steps(c, kGrads),
               {{0.8191611120, -2.1315191871}, {0.7139972580, -2.3342124370}, {0.4722826342, -2.3682335843}});
    // A tensor that does not decay moves as with no decay at all.
    OptimizerConfig plain{.kind = OptimizerKind::kLamb, .learning_rate = 0.1f};
    CHECK(lamb_steps(c, kGrads, {1.0f, -2.0f}, false) == lamb_steps(plain, kGrads));
}

TEST_CASE("lamb's trust ratio is 1 when a norm is 0", "[optimizer][lamb]") {
    CHECK(psrun::lamb_trust_ratio({0.0, 4.0}) == 1.0f);
    CHECK(psrun::lamb_trust_ratio({4.0, 0.0}) == 1.0f);
    CHECK(psrun::lamb_trust_ratio({0.0, 0.0}) == 1.0f);
    CHECK(psrun::lamb_trust_ratio({9.0, 4.0}) == 1.5f);
    OptimizerConfig c{.kind = OptimizerKind::kLamb, .learning_rate = 0.1f};
    // ||p|| = 0 (fresh zeros): trust 1, p = -0.1 r = -0.1 {1, -1}.
    check_lamb(lamb_steps(c, {{0.5f, -0.25f}}, {0.0f, 0.0f}), {{-0.1, 0.1}});
    // ||r|| = 0 (a zero gradient, no decay): p stays; then a gradient moves it as at update 2
    // (trust 2.12479593): p = {1, -2} - 0.212479593 {0.99999998, 0.99999996}.
    check_lamb(lamb_steps(c, {{0.0f, 0.0f}, {0.5f, 0.25f}}), {{1.0, -2.0}, {0.8418861148, -2.1581138808}});
    // A zero gradient with decay 0.1: r = 0.1 p, trust = 1 / 0.1: p -= 0.1 * 10 * 0.1 p, i.e. p *= 0.9.
    c.weight_decay = 0.1f;
    check_lamb(lamb_steps(c, {{0.0f, 0.0f}}), {{0.9, -1.8}});
}

TEST_CASE("lamb's two phases split into parts on threads equal one part bit for bit", "[optimizer][lamb]") {
    const std::size_t n = 5 * psrun::kLambBlockFloats + 123;  // a partial last block
    OptimizerConfig c{.kind = OptimizerKind::kLamb, .learning_rate = 0.01f, .beta2 = 0.99f, .weight_decay = 0.05f};
    const auto init = wave(n, 0.3f, 0.1f);
    std::vector<float> whole = init;
    Optimizer reference(c, n);
    for (int s = 0; s < 3; ++s) reference.apply(whole, wave(n, 0.1f, float(s)));
    for (int parts : {2, 3, 4, 7}) {
        INFO(parts << " parts");
        std::vector<float> p = init;
        Optimizer split(c, n);
        for (int s = 0; s < 3; ++s) {
            const auto g = wave(n, 0.1f, float(s));
            split.begin_update();
            std::vector<std::thread> threads;
            for (int k = 0; k < parts; ++k)
                threads.emplace_back([&, k] {
                    const auto [b, e] = psrun::lamb_block_range(n, k, parts);
                    split.lamb_moments(p, g, b, e, true);
                });
            for (auto& t : threads) t.join();
            split.lamb_finish();
            threads.clear();
            for (int k = 0; k < parts; ++k)
                threads.emplace_back([&, k] {
                    const auto [b, e] = psrun::part_range(n, parts - 1 - k, parts);  // any edges
                    split.lamb_step(p, b, e, true);
                });
            for (auto& t : threads) t.join();
        }
        CHECK(p == whole);
        CHECK(std::vector<float>(split.slots()[0].begin(), split.slots()[0].end()) ==
              std::vector<float>(reference.slots()[0].begin(), reference.slots()[0].end()));
        CHECK(std::vector<float>(split.slots()[1].begin(), split.slots()[1].end()) ==
              std::vector<float>(reference.slots()[1].begin(), reference.slots()[1].end()));
    }
    // UpdateKernel over the whole span (psd's sparse rows) sums the blocks the same way.
    std::vector<float> p = init;
    Optimizer kernel(c, n);
    for (int s = 0; s < 3; ++s) {
        kernel.begin_update();
        kernel.apply_range(p, wave(n, 0.1f, float(s)), 0, n, true);
    }
    CHECK(p == whole);
    // The blocks' edges: every part starts on one, the parts cover [0, n).
    std::size_t next = 0;
    for (int k = 0; k < 3; ++k) {
        const auto [b, e] = psrun::lamb_block_range(n, k, 3);
        CHECK(b == next);
        CHECK(b % psrun::kLambBlockFloats == 0);
        next = e;
    }
    CHECK(next == n);
}
