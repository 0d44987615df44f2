// The trainer's chunked parallel update equals one optimizer over the whole buffer, a seed
// makes training reproducible, and double-buffered gradients leave the buffer in flight alone.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>

#include "test/workerd/random_images.h"
#include "workerd/trainer.h"

namespace psrun::worker {
TEST_CASE("the parallel chunked update equals a single optimizer", "[trainer]") {
    omp_set_num_threads(2);
    const LabeledImages data = test::random_images(64, 5);
    TrainerConfig config;
    config.model.batch_size = 8;
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

TEST_CASE("a seed reproduces the losses; another seed does not", "[trainer]") {
    const LabeledImages data = test::random_images(64, 5);
    auto losses = [&](std::uint64_t seed) {
        TrainerConfig config;
        config.model.batch_size = 8;
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
    TrainerConfig config;
    config.model.batch_size = 8;
    for (int blocked : {0, 1}) {  // fc1's weight gradient written in place, or reordered into it
        config.model.fc1_blocked_weights = blocked;
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
