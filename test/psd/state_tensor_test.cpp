// State tensors (TensorClass::kState, e.g. BatchNorm's moving statistics) on psd: no optimizer,
// params -= g in async mode, the replicas' average g in sync mode, the NaN guard, and
// checkpoints that record the class (any shard count on restore).
#include <catch2/catch.hpp>

#include <filesystem>
#include <future>
#include <limits>

#include "common/tensor_file.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::sgd;

namespace {

// w (trainable), bn/var (state, 10000 floats: cut between 2 shards), b (trainable).
std::vector<TensorSpec> bn_model() {
    std::vector<TensorSpec> t = {{"w", {100, 90}}, {"bn/var", {10000}}, {"b", {10}}};
    t[1].tensor_class = TensorClass::kState;
    return t;
}
constexpr std::size_t kStateBegin = 9000, kStateEnd = 19000;
bool in_state(std::size_t i) { return i >= kStateBegin && i < kStateEnd; }

wire::InitConfig adam(std::uint64_t last_step = 0) {
    wire::InitConfig c;
    c.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 1e-2f};
    c.optimizer.schedule.warmup_steps = 2;  // the schedule must not touch state tensors either
    c.last_step = last_step;
    return c;
}

}  // namespace

TEST_CASE("async: state slices get params -= g exactly, trainable ones the optimizer; 2 shards equal 1",
          "[psd][state]") {
    const auto tensors = bn_model();
    const std::size_t n = total_elements(tensors);
    const auto init = ramp(n, 0.5f, -0.2f);
    const std::vector<std::vector<float>> grads = {ramp(n, 0.3f, -0.1f), ramp(n, -0.7f, 0.2f), ramp(n, 0.05f)};
    std::vector<float> expected = init;
    Optimizer local(adam().optimizer, n);  // element-wise: right for the trainable elements
    for (const auto& g : grads) local.apply(expected, g);
    for (std::size_t i = kStateBegin; i < kStateEnd; ++i) {
        float v = init[i];
        for (const auto& g : grads) v -= g[i];
        expected[i] = v;
    }
    for (std::uint32_t shards : {1u, 2u}) {
        Cluster cluster(shards, base_options(1));
        PsClient chief(cluster.client_options(0, tensors));
        REQUIRE(chief.hello());
        if (shards == 2) {  // the state tensor is cut between the two shards
            int state_slices = 0;
            for (const auto& s : chief.layout().slices) state_slices += s.tensor == 1;
            CHECK(state_slices == 2);
        }
        REQUIRE(chief.init(adam(), init));
        std::vector<float> out(n);
        for (std::size_t s = 0; s < grads.size(); ++s) REQUIRE(chief.push_pull(grads[s], s, out));
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < n; ++i) mismatches += out[i] != expected[i];
        CHECK(mismatches == 0);
        CHECK(out[kStateBegin] != init[kStateBegin]);
        auto stats = chief.stats(0);
        REQUIRE(stats);
        // Adam's two slots only for the trainable floats this shard holds.
        CHECK((*stats)["optimizer_floats"] == (shards == 1 ? 2 * 9010 : 2 * 9000));  // shard 0 holds [0, 9505)
    }
}

TEST_CASE("sync: a state slice moves by the average of the replicas' g, with no learning rate", "[psd][state]") {
    auto o = base_options(2);
    o.sync = true;
    o.replicas_to_aggregate = 2;
    Cluster cluster(2, o);
    const auto tensors = bn_model();
    PsClient chief(cluster.client_options(0, tensors));
    PsClient worker(cluster.client_options(1, tensors));
    REQUIRE(chief.hello());
    REQUIRE(worker.hello());
    const std::size_t n = total_elements(tensors);
    const auto params = ramp(n, 1.0f), ga = ramp(n, 0.4f), gb = ramp(n, -0.2f, 1.0f);
    REQUIRE(chief.init(sgd(0.5f), params));
    std::vector<float> out_a(n), out_b(n);
    auto first = std::async(std::launch::async, [&] { return chief.push_pull(ga, 0, out_a); });
    REQUIRE(worker.push_pull(gb, 0, out_b));
    REQUIRE(first.get());
    for (std::size_t i = 0; i < n; ++i) {
        const float mean = (ga[i] + gb[i]) * 0.5f;
        const float want = in_state(i) ? params[i] - mean : params[i] - 0.5f * mean;
        REQUIRE(out_a[i] == Approx(want).margin(1e-6));
        REQUIRE(out_b[i] == out_a[i]);
    }
}

TEST_CASE("a NaN in a state tensor's g is rejected like a NaN gradient", "[psd][state]") {
    Cluster cluster(1, base_options(1));
    const auto tensors = bn_model();
    PsClient chief(cluster.client_options(0, tensors));
    REQUIRE(chief.hello());
    const std::size_t n = total_elements(tensors);
    const auto params = ramp(n, 1.0f);
    REQUIRE(chief.init(sgd(0.5f), params));
    auto g = ramp(n, 0.1f);
    g[kStateBegin + 7] = std::numeric_limits<float>::quiet_NaN();
    std::vector<float> out(n);
    auto r = chief.push_pull(g, 0, out);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kRejected);
    REQUIRE(chief.pull(out));
    CHECK(out == params);  // nothing applied, the trainable tensors included
}

TEST_CASE("checkpoints record the tensor class and restore state tensors into any shard count", "[psd][state]") {
    const auto tensors = bn_model();
    const std::size_t n = total_elements(tensors);
    const std::string dir = psrun::test::make_temp_dir();
    std::vector<float> saved(n);
    {
        Cluster cluster(2, base_options(1));
        PsClient chief(cluster.client_options(0, tensors));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(adam(), ramp(n, 0.5f)));
        for (std::uint64_t s = 0; s < 3; ++s) REQUIRE(chief.push_pull(ramp(n, 0.1f * float(s + 1)), s, saved));
        REQUIRE(chief.save(3, dir));
    }
    // The files: the state tensor's pieces have a 5-float state part with class 1 and no slots.
    std::size_t state_pieces = 0;
    for (std::uint32_t i = 0; i < 2; ++i) {
        auto file = read_tensor_file(dir + "/ps-" + std::to_string(i) + "-of-2.tensors");
        REQUIRE(file);
        for (const auto& t : *file) {
            if (!t.name.starts_with("bn/var@")) {
                if (t.name.ends_with("/state")) CHECK(t.data.at(4) == 0.0f);
                continue;
            }
            CHECK_FALSE(t.name.ends_with("/slot0"));
            if (!t.name.ends_with("/state")) continue;
            ++state_pieces;
            REQUIRE(t.data.size() == 5);
            CHECK(t.data[4] == 1.0f);
        }
    }
    CHECK(state_pieces == 2);

    // Restore into one shard, then one more step on both sides of the comparison.
    Cluster one(1, base_options(1));
    PsClient chief(one.client_options(0, tensors));
    REQUIRE(chief.hello());
    auto config = adam();
    config.start_step = 3;
    REQUIRE(chief.restore(config, dir));
    std::vector<float> out(n);
    REQUIRE(chief.pull(out));
    CHECK(out == saved);
    const auto g = ramp(n, -0.2f);
    REQUIRE(chief.push_pull(g, 3, out));
    for (std::size_t i = kStateBegin; i < kStateEnd; ++i) REQUIRE(out[i] == saved[i] - g[i]);

    // A model that has the tensor as trainable is refused, naming it.
    auto trainable = tensors;
    trainable[1].tensor_class = TensorClass::kTrainable;
    Cluster other(1, base_options(1));
    PsClient other_chief(other.client_options(0, trainable));
    REQUIRE(other_chief.hello());
    auto refused = other_chief.restore(config, dir);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("'bn/var' was saved as a state tensor"));
    std::filesystem::remove_all(dir);
}

TEST_CASE("the standby shard file keeps state slices without slots", "[psd][state][shard]") {
    const auto tensors = bn_model();
    const auto layout = *compute_layout(tensors, 2);
    const std::string dir = psrun::test::make_temp_dir();
    for (std::uint32_t shard : {0u, 1u}) {
        psd::ShardState a(layout, shard, tensors);
        std::vector<std::vector<float>> init, grad;
        for (auto id : a.slice_ids()) {
            init.push_back(ramp(layout.slices[id].length, 0.5f));
            grad.push_back(ramp(layout.slices[id].length, -0.3f, 0.1f));
        }
        a.init(adam(), std::vector<std::span<const float>>(init.begin(), init.end()));
        const std::vector<std::span<const float>> g(grad.begin(), grad.end());
        a.apply(g);
        const std::string path = dir + "/ps-" + std::to_string(shard) + ".shard";
        REQUIRE(a.save(path));
        psd::ShardState b(layout, shard, tensors);
        REQUIRE(b.load(path));
        a.apply(g);
        b.apply(g);
        for (std::size_t k = 0; k < a.slice_ids().size(); ++k) {
            const auto pa = a.param_slice(k), pb = b.param_slice(k);
            CHECK(std::equal(pa.begin(), pa.end(), pb.begin()));
            CHECK(a.slot_slices(k).size() == (a.is_state(k) ? 0u : 2u));
        }
    }
    std::filesystem::remove_all(dir);
}
