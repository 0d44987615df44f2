// Gradient accumulation (TrainerConfig::accumulate_steps, --accumulate-steps): N micro-batches of
// B give the gradient (and, after an update, the parameters) of one batch of N x B, with a mean
// loss and with a summed one; BatchNorm's moving statistics move once per micro-batch and travel
// as one delta; clipping applies to the accumulated gradient.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "test/workerd/random_images.h"
#include "test/workerd/trainer_config.h"
#include "workerd/trainer.h"

namespace psrun::worker {
namespace {

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

// Largest |a - b| over the largest |b|: rounding of a float sum in another order stays ~1e-6.
double relative_difference(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double diff = 0, scale = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        diff = std::max(diff, std::fabs(double(a[i]) - double(b[i])));
        scale = std::max(scale, std::fabs(double(b[i])));
    }
    REQUIRE(scale > 0);
    return diff / scale;
}

double norm(const std::vector<float>& g) {
    double sum = 0;
    for (float v : g) sum += double(v) * double(v);
    return std::sqrt(sum);
}

// A conv + BatchNorm network without dropout: its state tensors are the BN moving statistics.
TrainerConfig batch_norm_config(int batch, int accumulate) {
    auto model = nn::parse_model_text(R"({
      "name": "bn_net", "input": {"channels": 1, "height": 28, "width": 28}, "classes": 10,
      "layers": [
        {"kind": "conv2d", "name": "c1", "filters": 4, "kernel": 3},
        {"kind": "batch_norm", "name": "bn1"},
        {"kind": "relu"},
        {"kind": "avg_pool", "window": 2},
        {"kind": "dense", "name": "out", "units": 10}
      ],
      "loss": {"kind": "softmax_cross_entropy", "reduction": "mean"}})",
                                      "bn_net.json");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    TrainerConfig config;
    config.model = std::make_shared<const nn::ModelDescription>(std::move(*model));
    config.network.batch_size = batch;
    config.accumulate_steps = accumulate;
    return config;
}

}  // namespace

TEST_CASE("accumulating N micro-batches of B gives the gradient and the update of one batch of N x B",
          "[trainer][accumulate]") {
    omp_set_num_threads(2);
    // lenet5 averages its loss over the batch, dls_mlp sums it; neither has dropout or BatchNorm.
    for (const char* name : {"lenet5", "dls_mlp"}) {
        for (const int n : {2, 4}) {
            INFO(name << ", " << n << " micro-batches");
            const int micro = 8;
            // Exactly one large batch of examples: both trainers draw all of them in their first update.
            const LabeledImages data = test::random_images(static_cast<std::size_t>(micro * n), 11);
            TrainerConfig small = test::zoo_trainer_config(name, micro);
            small.accumulate_steps = n;
            small.optimizer.kind = OptimizerKind::kSgd;
            small.optimizer.learning_rate = 0.05f;
            TrainerConfig large = test::zoo_trainer_config(name, micro * n);
            large.optimizer = small.optimizer;
            Trainer accumulating(small, data, data);
            Trainer reference(large, data, data);
            REQUIRE(copy(accumulating.params().all()) == copy(reference.params().all()));  // same initial weights
            const float loss = accumulating.compute_gradients();
            const float reference_loss = reference.compute_gradients();
            CHECK(loss == Approx(reference_loss).epsilon(1e-5));
            const auto g = copy(accumulating.grads().all());
            const auto want = copy(reference.grads().all());
            CHECK(relative_difference(g, want) < 1e-5);
            // A single micro-batch's gradient is not the large batch's: the test can tell them apart.
            TrainerConfig one = small;
            one.accumulate_steps = 1;
            Trainer single(one, data, data);
            single.compute_gradients();
            CHECK(relative_difference(copy(single.grads().all()), want) > 1e-2);
            accumulating.apply_gradients();
            reference.apply_gradients();
            CHECK(accumulating.global_step() == 1);  // one update for N micro-batches
            CHECK(relative_difference(copy(accumulating.params().all()), copy(reference.params().all())) < 1e-6);
        }
    }
}

TEST_CASE("clipping applies to the accumulated gradient", "[trainer][accumulate]") {
    omp_set_num_threads(2);
    const LabeledImages data = test::random_images(32, 12);
    TrainerConfig config = test::zoo_trainer_config("lenet5", 8);
    config.accumulate_steps = 4;
    Trainer raw(config, data, data);
    raw.compute_gradients();
    const auto g = copy(raw.grads().all());
    const double full = norm(g);
    REQUIRE(full > 0);
    config.optimizer.clip_global_norm = static_cast<float>(full / 4);
    Trainer clipped(config, data, data);
    clipped.compute_gradients();
    CHECK(clipped.clipped_steps() == 1);
    CHECK(clipped.last_grad_norm() == Approx(full).epsilon(1e-6));  // the norm of the accumulated gradient
    const auto c = copy(clipped.grads().all());
    std::vector<float> quarter(g.size());
    std::transform(g.begin(), g.end(), quarter.begin(), [](float v) { return 0.25f * v; });
    CHECK(relative_difference(c, quarter) < 1e-6);
}

TEST_CASE("BatchNorm's moving statistics move once per micro-batch and go out as one delta", "[trainer][accumulate]") {
    omp_set_num_threads(2);
    const LabeledImages data = test::random_images(64, 13);
    const int n = 3;
    Trainer accumulating(batch_norm_config(8, n), data, data);
    Trainer stepwise(batch_norm_config(8, 1), data, data);  // same seed: the same micro-batches in order
    const auto& tensors = accumulating.params().tensors();
    const auto start = copy(accumulating.params().all());
    accumulating.compute_gradients();
    // Stepwise: each micro-batch's state delta applied before the next, trainable gradients summed.
    std::vector<float> sum(start.size(), 0.0f);
    std::size_t state_floats = 0;
    for (int k = 0; k < n; ++k) {
        stepwise.compute_gradients();
        auto p = stepwise.params().all();
        const auto g = stepwise.grads().all();
        for (const auto& t : tensors)
            for (std::size_t i = t.offset; i < t.offset + t.size; ++i) {
                if (t.tensor_class == TensorClass::kState) p[i] -= g[i];
                else sum[i] += g[i] / n;
            }
    }
    const auto after = copy(stepwise.params().all());
    const auto got = copy(accumulating.grads().all());
    const auto params = copy(accumulating.params().all());
    std::vector<float> state_want, state_got, trainable_want, trainable_got;
    for (const auto& t : tensors)
        for (std::size_t i = t.offset; i < t.offset + t.size; ++i) {
            if (t.tensor_class == TensorClass::kState) {
                ++state_floats;
                state_want.push_back(start[i] - after[i]);  // the whole move of N micro-batches
                state_got.push_back(got[i]);
                CHECK(params[i] == start[i]);  // the parameters are back: psd applies the delta
            } else {
                trainable_want.push_back(sum[i]);
                trainable_got.push_back(got[i]);
            }
        }
    REQUIRE(state_floats == 8);  // bn1's mean and variance, 4 channels each
    CHECK(relative_difference(state_got, state_want) < 1e-5);
    CHECK(relative_difference(trainable_got, trainable_want) < 1e-5);
    // One micro-batch's delta is not it: the statistics moved more than once.
    Trainer once(batch_norm_config(8, 1), data, data);
    once.compute_gradients();
    std::vector<float> first;
    for (const auto& t : tensors)
        if (t.tensor_class == TensorClass::kState)
            for (std::size_t i = t.offset; i < t.offset + t.size; ++i) first.push_back(once.grads().all()[i]);
    CHECK(relative_difference(first, state_want) > 1e-2);
    // The update applies the whole delta: the statistics end where N steps of them would.
    accumulating.apply_gradients();
    std::vector<float> applied;
    for (const auto& t : tensors)
        if (t.tensor_class == TensorClass::kState)
            for (std::size_t i = t.offset; i < t.offset + t.size; ++i)
                applied.push_back(accumulating.params().all()[i]);
    std::vector<float> stepped;
    for (const auto& t : tensors)
        if (t.tensor_class == TensorClass::kState)
            for (std::size_t i = t.offset; i < t.offset + t.size; ++i) stepped.push_back(after[i]);
    CHECK(relative_difference(applied, stepped) < 1e-5);
}

}  // namespace psrun::worker
