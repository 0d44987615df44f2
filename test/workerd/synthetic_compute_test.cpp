// Synthetic compute's jitter (docs/scaling.md): the spec is parsed strictly, the draws repeat per
// (seed, worker) and differ across workers, their mean and spread are the exponential's, and the
// options refuse jitter without --synthetic-compute-ms.
#include <catch2/catch.hpp>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <vector>

#include "test/workerd/random_images.h"
#include "test/workerd/trainer_config.h"
#include "workerd/synthetic_compute.h"
#include "workerd/train_options.h"
#include "workerd/trainer.h"

namespace psrun::worker {
namespace {
std::vector<double> draws(double base, double mean, std::uint64_t seed, std::uint32_t worker, int n) {
    SyntheticCompute s(base, ComputeJitter{mean}, seed, worker);
    std::vector<double> out;
    for (int i = 0; i < n; ++i) out.push_back(s.next_ms());
    return out;
}
}  // namespace

TEST_CASE("jitter specs: none and exp:MEAN_MS parse, everything else is refused", "[synthetic]") {
    CHECK(!parse_compute_jitter("none")->enabled());
    CHECK(!parse_compute_jitter("")->enabled());
    const auto e = parse_compute_jitter("exp:12.5");
    REQUIRE(e);
    CHECK(e->exp_mean_ms == 12.5);
    CHECK(to_string(*e) == "exp:12.5");
    CHECK(to_string(ComputeJitter{}) == "none");
    for (const char* bad : {"exp:", "exp:0", "exp:-3", "exp:abc", "exp:5ms", "exp:nan", "exp:inf", "exp:3600001",
                            "normal:5", "5", "EXP:5"}) {
        INFO(bad);
        const auto r = parse_compute_jitter(bad);
        REQUIRE(!r);
        CHECK(r.error().code == ErrorCode::kInvalidArgument);
    }
}

TEST_CASE("jitter draws repeat per seed and worker, differ across workers, and are base + Exp(mean)", "[synthetic]") {
    const double base = 100, mean = 20;
    const int n = 20000;
    const auto a = draws(base, mean, 1, 3, n);
    CHECK(draws(base, mean, 1, 3, n) == a);
    CHECK(draws(base, mean, 1, 4, n) != a);
    CHECK(draws(base, mean, 2, 3, n) != a);
    CHECK(std::all_of(a.begin(), a.end(), [&](double v) { return v > base; }));
    // The exponential's mean and standard deviation are both `mean`; the sample mean of n draws is
    // within 5 standard errors of it, and so is the sample standard deviation (its standard error
    // is about mean * sqrt(2) / sqrt(n) for the exponential's kurtosis of 9).
    double sum = 0, sq = 0;
    for (double v : a) sum += v - base;
    const double m = sum / n;
    for (double v : a) sq += (v - base - m) * (v - base - m);
    const double sd = std::sqrt(sq / (n - 1));
    CHECK(std::abs(m - mean) < 5 * mean / std::sqrt(n));
    CHECK(std::abs(sd - mean) < 5 * mean * std::sqrt(2.0) / std::sqrt(n));
    // Without jitter every step is the base time.
    SyntheticCompute constant(base, ComputeJitter{}, 1, 0);
    CHECK(constant.next_ms() == base);
}

TEST_CASE("the trainer sleeps the synthetic time plus the worker's own jitter draw", "[synthetic][trainer]") {
    const LabeledImages data = test::random_images(64, 5);
    TrainerConfig config = test::zoo_trainer_config("dls_mlp", 16);
    config.synthetic_compute_ms = 10;
    config.synthetic_jitter = ComputeJitter{15};
    config.seed = 7;
    config.shard = ShardSpec{2, 4};
    Trainer trainer(config, data, data);
    SyntheticCompute expected(config.synthetic_compute_ms, config.synthetic_jitter, config.seed, 2);
    for (int step = 0; step < 3; ++step) {
        const double want = expected.next_ms();
        const auto t0 = std::chrono::steady_clock::now();
        CHECK(trainer.compute_gradients() == 0.0f);
        const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
        CHECK(ms >= want);
    }
}

TEST_CASE("make_trainer_config refuses a bad jitter spec and jitter without --synthetic-compute-ms", "[synthetic]") {
    TrainOptions o;
    o.model = "dls_mlp";
    o.synthetic_compute_jitter = "exp:20";
    CHECK_THROWS_WITH(make_trainer_config(o), Catch::Contains("needs --synthetic-compute-ms"));
    o.synthetic_compute_ms = 50;
    CHECK(make_trainer_config(o).synthetic_jitter.exp_mean_ms == 20);
    o.synthetic_compute_jitter = "exp:-1";
    CHECK_THROWS_WITH(make_trainer_config(o), Catch::Contains("--synthetic-compute-jitter"));
    o.synthetic_compute_jitter = "none";
    CHECK(!make_trainer_config(o).synthetic_jitter.enabled());
}

}  // namespace psrun::worker
