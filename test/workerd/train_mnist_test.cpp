// A short real training run on MNIST: the loss falls and test accuracy passes 97%.
// Batch 100, Adam 1e-3, 500 steps (50,000 images, under a minute on 2 loaded cores).
#include <catch2/catch.hpp>

#include "test/workerd/trainer_config.h"

#include <omp.h>

#include <cmath>

#include "workerd/data/dataset_fetch.h"
#include "workerd/data/idx_reader.h"
#include "workerd/trainer.h"

namespace psrun::worker {

TEST_CASE("standalone training on real MNIST reaches > 97% test accuracy", "[train][mnist]") {
    const std::string dir = default_data_dir(DatasetKind::kMnist);
    auto fetched = fetch_dataset(DatasetKind::kMnist, dir);  // no-op after `psrun data fetch`
    REQUIRE(fetched);
    auto train = load_split(dir, "train");
    auto test = load_split(dir, "t10k");
    REQUIRE(train);
    REQUIRE(test);

    omp_set_num_threads(2);
    TrainerConfig config = test::zoo_trainer_config("mnist_deep", 100);
    config.optimizer.kind = OptimizerKind::kAdam;
    config.optimizer.learning_rate = 1e-3f;
    config.seed = 1;
    Trainer trainer(config, *train, *test);

    const double initial_accuracy = trainer.evaluate().accuracy;
    double first_losses = 0, last_losses = 0;
    const int steps = 500;
    for (int step = 0; step < steps; ++step) {
        const float loss = trainer.compute_gradients();
        REQUIRE(std::isfinite(loss));
        trainer.apply_gradients();
        if (step < 20) first_losses += loss;
        if (step >= steps - 20) last_losses += loss;
    }
    const double accuracy = trainer.evaluate().accuracy;
    INFO("initial accuracy " << initial_accuracy << ", loss " << first_losses / 20 << " -> " << last_losses / 20
                             << ", test accuracy " << accuracy);
    CHECK(trainer.global_step() == static_cast<std::uint64_t>(steps));
    CHECK(initial_accuracy < 0.3);
    CHECK(last_losses < 0.25 * first_losses);
    CHECK(accuracy > 0.97);
}

}  // namespace psrun::worker
