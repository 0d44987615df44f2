// The trainer's chunked parallel update equals one optimizer over the whole buffer, and a seed
// makes training reproducible.
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
