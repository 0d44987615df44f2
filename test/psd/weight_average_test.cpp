// psd's moving average of the weights (--ema-decay, psd/weight_average.h): the update rule by hand
// and against torch.optim.swa_utils.AveragedModel's form, kept by real in-process shards through
// pushes, saved in coordinated checkpoints ("ema" pieces), restored (also into another shard count)
// so that it goes on where it was, and in the standby shard file.
#include "psd/weight_average.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>

#include "common/checkpoint_params.h"
#include "common/checkpointer.h"
#include "psd/shard_state.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::small_model;
namespace fs = std::filesystem;

namespace {

constexpr float kDecay = 0.9f;

// The average after each of `pulled` (the parameters after updates 1, 2, ...), folded as
// WeightAverage does: the first copied, then ema += (1 - D) (p - ema).
std::vector<float> expected_average(const std::vector<std::vector<float>>& pulled, std::vector<float> ema = {}) {
    for (const auto& p : pulled) {
        if (ema.empty()) {
            ema = p;
            continue;
        }
        for (std::size_t i = 0; i < p.size(); ++i) ema[i] += (1.0f - kDecay) * (p[i] - ema[i]);
    }
    return ema;
}

wire::InitConfig momentum_init() {
    wire::InitConfig init;
    init.optimizer = OptimizerConfig{.kind = OptimizerKind::kMomentum, .learning_rate = 0.05f};
    init.optimizer.ema_decay = kDecay;
    init.last_step = 100;
    return init;
}

psd::ServerOptions one_worker() {
    psd::ServerOptions o;
    o.num_workers = 1;
    o.worker_timeout = std::chrono::milliseconds(30000);
    return o;
}

struct TempDir {
    std::string path = psrun::test::make_temp_dir();
    ~TempDir() { fs::remove_all(path); }
};

}  // namespace

TEST_CASE("the average copies the first update, then folds each one in with weight 1 - decay", "[psd][ema]") {
    psd::WeightAverage average;
    CHECK_FALSE(average.enabled());
    const std::vector<float> p0 = {1.0f, -2.0f, 4.0f}, p1 = {2.0f, 0.0f, 4.0f}, p2 = {0.0f, 1.0f, -6.0f};
    average.reset(0.75f, {std::span<const float>(p0)});
    REQUIRE(average.enabled());
    CHECK_FALSE(average.started());
    CHECK(std::vector<float>(average.slice(0).begin(), average.slice(0).end()) == p0);
    average.update_range(0, p1, 0, 3);
    average.finish_update();
    CHECK(std::vector<float>(average.slice(0).begin(), average.slice(0).end()) == p1);  // copied, not blended with p0
    average.update_range(0, p2, 0, 2);  // two ranges, as the update's threads split a slice
    average.update_range(0, p2, 2, 3);
    average.finish_update();
    // torch's avg_fn: 0.75 * averaged + 0.25 * current (exact in binary here).
    CHECK(average.slice(0)[0] == 1.5f);
    CHECK(average.slice(0)[1] == 0.25f);
    CHECK(average.slice(0)[2] == 1.5f);
    average.retune(0.5f, {std::span<const float>(p0)});  // on stays on: its values are kept
    CHECK(average.slice(0)[0] == 1.5f);
    average.retune(0.0f, {std::span<const float>(p0)});
    CHECK_FALSE(average.enabled());
    CHECK(average.slice(0).empty());
    CHECK(average.floats() == 0);
}

TEST_CASE("shards keep the average through pushes, checkpoints and a restore into another shard count", "[psd][ema]") {
    const auto tensors = small_model();
    TempDir dir;
    std::vector<std::vector<float>> pulled;
    CheckpointInfo first;
    {
        Cluster cluster(2, one_worker());
        PsClient chief(cluster.client_options(0, tensors));
        REQUIRE(chief.hello());
        const std::size_t n = chief.layout().total;
        REQUIRE(chief.init(momentum_init(), ramp(n, 0.5f, -0.2f)));
        std::vector<float> out(n);
        for (int s = 0; s < 4; ++s) {
            REQUIRE(
                chief.push_pull(ramp(n, 0.3f * static_cast<float>(s + 1), -0.1f), static_cast<std::uint64_t>(s), out));
            pulled.push_back(out);
        }
        Checkpointer saver(CheckpointerOptions{dir.path, 5, 0, 0, momentum_init(), nullptr});
        auto saved = saver.save(chief, 4);
        REQUIRE(saved);
        first = *saved;
    }
    auto average = load_checkpoint_parameters(first.dir, tensors, CheckpointValues::kAverage);
    REQUIRE(average);
    const auto expected = expected_average(pulled);
    CHECK(average->values == expected);
    auto params = load_checkpoint_parameters(first.dir, tensors);
    REQUIRE(params);
    CHECK(params->values == pulled.back());
    CHECK(average->values != pulled.back());
    // The same against torch's form, 0.9 * averaged + 0.1 * current, within rounding.
    std::vector<double> torch_form(pulled[0].begin(), pulled[0].end());
    for (std::size_t s = 1; s < pulled.size(); ++s)
        for (std::size_t i = 0; i < torch_form.size(); ++i) torch_form[i] = 0.9 * torch_form[i] + 0.1 * pulled[s][i];
    double worst = 0;
    for (std::size_t i = 0; i < torch_form.size(); ++i)
        worst = std::max(worst, std::abs(torch_form[i] - average->values[i]));
    CHECK(worst < 1e-5);

    // Restored into one shard: the next update folds into the saved average (not a fresh copy).
    Cluster cluster(1, one_worker());
    PsClient chief(cluster.client_options(0, tensors));
    REQUIRE(chief.hello());
    Checkpointer restorer(CheckpointerOptions{dir.path, 5, 0, 0, momentum_init(), nullptr});
    auto restored = restorer.restore(chief);
    REQUIRE(restored);
    REQUIRE(restored->has_value());
    const std::size_t n = chief.layout().total;
    std::vector<float> out(n);
    REQUIRE(chief.push_pull(ramp(n, 1.5f, -0.1f), 4, out));
    auto saved = restorer.save(chief, 5);
    REQUIRE(saved);
    auto after = load_checkpoint_parameters(saved->dir, tensors, CheckpointValues::kAverage);
    REQUIRE(after);
    CHECK(after->values == expected_average({out}, expected));
}

TEST_CASE("a checkpoint without an average is refused for --ema with what to do", "[psd][ema]") {
    const auto tensors = small_model();
    TempDir dir;
    auto init = momentum_init();
    init.optimizer.ema_decay = 0.0f;
    Cluster cluster(1, one_worker());
    PsClient chief(cluster.client_options(0, tensors));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    REQUIRE(chief.init(init, ramp(n, 0.5f)));
    std::vector<float> out(n);
    REQUIRE(chief.push_pull(ramp(n, 0.3f), 0, out));
    Checkpointer saver(CheckpointerOptions{dir.path, 5, 0, 0, init, nullptr});
    auto saved = saver.save(chief, 1);
    REQUIRE(saved);
    auto average = load_checkpoint_parameters(saved->dir, tensors, CheckpointValues::kAverage);
    REQUIRE_FALSE(average);
    CHECK(average.error().code == ErrorCode::kNotFound);
    CHECK_THAT(average.error().message, Catch::Contains("--ema-decay"));
    CHECK(load_checkpoint_parameters(saved->dir, tensors));
}

TEST_CASE("the standby shard file keeps the average", "[psd][ema][shard]") {
    const auto tensors = small_model();
    const auto layout = *compute_layout(tensors, 2);
    TempDir dir;
    const std::string path = dir.path + "/ps-0.shard";
    psd::ShardState a(layout, 0, tensors);
    std::vector<std::vector<float>> init, grad;
    for (auto id : a.slice_ids()) {
        init.push_back(ramp(layout.slices[id].length, 0.5f));
        grad.push_back(ramp(layout.slices[id].length, -0.3f, 0.1f));
    }
    std::vector<std::span<const float>> init_spans(init.begin(), init.end()), grad_spans(grad.begin(), grad.end());
    a.init(momentum_init(), init_spans);
    a.apply(grad_spans);
    a.apply(grad_spans);
    REQUIRE(a.save(path));
    psd::ShardState b(layout, 0, tensors);
    REQUIRE(b.load(path));
    CHECK(b.config().optimizer.ema_decay == kDecay);
    a.apply(grad_spans);
    b.apply(grad_spans);
    for (std::size_t k = 0; k < a.slice_ids().size(); ++k) {
        const auto x = a.average().slice(k), y = b.average().slice(k);
        REQUIRE(x.size() == y.size());
        CHECK(std::equal(x.begin(), x.end(), y.begin()));
        CHECK_FALSE(std::equal(x.begin(), x.end(), a.param_slice(k).begin()));  // an average, not the weights
    }
}
