// The trainer's chunked parallel update equals one optimizer over the whole buffer, a seed
// makes training reproducible, and double-buffered gradients leave the buffer in flight alone.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>

#include "test/workerd/random_images.h"
#include "test/workerd/trainer_config.h"
#include "workerd/trainer.h"

namespace psrun::worker {
namespace {
TrainerConfig mnist_deep_config() { return test::zoo_trainer_config("mnist_deep", 8); }
}  // namespace

TEST_CASE("the parallel chunked update equals a single optimizer", "[trainer]") {
    omp_set_num_threads(2);
    const LabeledImages data = test::random_images(64, 5);
    TrainerConfig config = mnist_deep_config();
    config.optimizer.kind = OptimizerKind::kAdam;
    config.optimizer.learning_rate = 1e-3f;
    Trainer trainer(config, data, data);
    Optimizer reference(config.optimizer, trainer.params().size());
    std::vector<float> expected(trainer.params().all().begin(), trainer.params().all().end());
    for (int step = 0; step < 3; ++step) {
        trainer.compute_gradients();
        reference.apply(expected, trainer.grads().all());
        trainer.apply_gradients();
        const auto got = trainer.params().all();
        CHECK(std::equal(got.begin(), got.end(), expected.begin()));
    }
    CHECK(trainer.global_step() == 3);
}

TEST_CASE("--clip-global-norm scales the whole gradient by C / ||g|| when ||g|| > C, else leaves it", "[trainer]") {
    omp_set_num_threads(2);
    const LabeledImages data = test::random_images(64, 5);
    auto gradient = [&](float clip, Trainer** keep = nullptr) {
        TrainerConfig config = mnist_deep_config();
        config.optimizer.clip_global_norm = clip;
        static std::unique_ptr<Trainer> last;  // the last trainer stays alive for its counters
        last = std::make_unique<Trainer>(config, data, data);
        last->compute_gradients();
        if (keep) *keep = last.get();
        const auto g = last->grads().all();
        return std::vector<float>(g.begin(), g.end());
    };
    const auto raw = gradient(0.0f);
    double sum = 0;
    for (float v : raw) sum += double(v) * double(v);
    const double norm = std::sqrt(sum);
    REQUIRE(norm > 0.01);
    Trainer* clipped_trainer = nullptr;
    const auto clipped = gradient(static_cast<float>(norm / 4), &clipped_trainer);
    CHECK(clipped_trainer->clipped_steps() == 1);
    CHECK(clipped_trainer->last_grad_norm() == Approx(norm).epsilon(1e-6));
    double clipped_sum = 0;
    std::size_t off = 0;
    for (std::size_t i = 0; i < raw.size(); ++i) {
        clipped_sum += double(clipped[i]) * double(clipped[i]);
        off += std::fabs(clipped[i] - 0.25f * raw[i]) > 1e-6f * (1.0f + std::fabs(raw[i]));
    }
    CHECK(off == 0);
    CHECK(std::sqrt(clipped_sum) == Approx(norm / 4).epsilon(1e-5));
    Trainer* loose = nullptr;
    CHECK(gradient(static_cast<float>(norm * 2), &loose) == raw);  // under the limit: untouched
    CHECK(loose->clipped_steps() == 0);
}

TEST_CASE("a seed reproduces the losses; another seed does not", "[trainer]") {
    const LabeledImages data = test::random_images(64, 5);
    auto losses = [&](std::uint64_t seed) {
        TrainerConfig config = mnist_deep_config();
        config.seed = seed;
        Trainer trainer(config, data, data);
        std::vector<float> out;
        for (int step = 0; step < 3; ++step) {
            out.push_back(trainer.compute_gradients());
            trainer.apply_gradients();
        }
        return out;
    };
    const auto a = losses(1);
    CHECK(losses(1) == a);
    CHECK(losses(2) != a);
}

}  // namespace psrun::worker

namespace psrun::worker {

TEST_CASE("swapped gradient buffers: the next step writes the other one, the sent one stays", "[trainer]") {
    const LabeledImages data = test::random_images(64, 5);
    TrainerConfig config = mnist_deep_config();
    std::vector<nn::Precision> precisions{nn::Precision::kF32};
    if (nn::engine_bf16_supported()) precisions.push_back(nn::Precision::kBf16);  // other weight layouts
    for (const nn::Precision precision : precisions) {
        config.network.precision = precision;
        Trainer swapping(config, data, data);
        Trainer reference(config, data, data);  // same seed: same batches and dropout masks
        for (int step = 0; step < 3; ++step) {
            swapping.compute_gradients();
            reference.compute_gradients();
            const auto sent = swapping.grads().all();
            const std::vector<float> before(sent.begin(), sent.end());
            CHECK(std::equal(sent.begin(), sent.end(), reference.grads().all().begin()));
            swapping.swap_gradient_buffers();
            swapping.compute_gradients();  // into the other buffer
            reference.compute_gradients();
            const auto next = swapping.grads().all();
            CHECK(next.data() != sent.data());
            CHECK(std::equal(sent.begin(), sent.end(), before.begin()));  // untouched
            // Every tensor of the new step landed in the new buffer.
            CHECK(std::equal(next.begin(), next.end(), reference.grads().all().begin()));
            CHECK(!std::equal(next.begin(), next.end(), before.begin()));
            swapping.swap_gradient_buffers();
        }
    }
}

}  // namespace psrun::worker

namespace psrun::worker {

TEST_CASE("gradients computed into outside memory (shared-memory regions) equal the trainer's own", "[trainer]") {
    const LabeledImages data = test::random_images(64, 5);
    TrainerConfig config = mnist_deep_config();
    Trainer outside(config, data, data);
    Trainer reference(config, data, data);  // same seed: same batches and dropout masks
    const std::size_t n = outside.params().size();
    const std::size_t padded = (n + 15) / 16 * 16;  // keep the second region 64-byte aligned
    std::vector<float, std::allocator<float>> storage(2 * padded + 16);
    float* base = storage.data();
    while (reinterpret_cast<std::uintptr_t>(base) % 64 != 0) ++base;
    const std::vector<std::span<float>> regions = {{base, n}, {base + padded, n}};
    outside.use_gradient_memory(regions);
    for (int step = 0; step < 4; ++step) {
        outside.compute_gradients();
        reference.compute_gradients();
        const auto written = regions[static_cast<std::size_t>(step % 2)];
        CHECK(outside.grads().all().data() == written.data());
        CHECK(std::equal(written.begin(), written.end(), reference.grads().all().begin()));
        outside.swap_gradient_buffers();
    }
    outside.use_gradient_memory({});  // back to its own buffer: the regions are left alone
    const std::vector<float> before(regions[0].begin(), regions[0].end());
    outside.compute_gradients();
    reference.compute_gradients();
    CHECK(outside.grads().all().data() != regions[0].data());
    CHECK(std::equal(before.begin(), before.end(), regions[0].begin()));
    CHECK(std::equal(outside.grads().all().begin(), outside.grads().all().end(), reference.grads().all().begin()));
    std::vector<float> misaligned(n + 1);
    CHECK_THROWS_AS(outside.use_gradient_memory({{misaligned.data() + 1, n}}), std::invalid_argument);
}

}  // namespace psrun::worker

namespace psrun::worker {

TEST_CASE("synthetic compute sleeps instead of training and writes a gradient of the model's size", "[trainer]") {
    const LabeledImages data = test::random_images(64, 5);
    TrainerConfig config = test::zoo_trainer_config("dls_mlp", 16);
    config.synthetic_compute_ms = 30;
    Trainer trainer(config, data, data);
    trainer.grads().fill(0.5f);
    const auto t0 = std::chrono::steady_clock::now();
    CHECK(trainer.compute_gradients() == 0.0f);
    const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
    CHECK(ms >= 30.0);
    const auto g = trainer.grads().all();
    CHECK(g.size() == static_cast<std::size_t>(config.model->parameter_count));
    CHECK(std::all_of(g.begin(), g.end(), [](float v) { return v == 1e-7f; }));
}

}  // namespace psrun::worker
