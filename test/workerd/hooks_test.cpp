// The worker's hook list: chief-only hooks are skipped on other workers, StopAtStep stops at
// psd's last step, and the NaN guard refuses to push a non-finite loss or gradient.
#include <catch2/catch.hpp>

#include "test/workerd/trainer_config.h"

#include <omp.h>

#include <cmath>
#include <limits>

#include "test/workerd/random_images.h"
#include "workerd/chief_hooks.h"
#include "workerd/hooks.h"

namespace psrun::worker {
namespace {

struct CountingHook : Hook {
    bool chief = false;
    int* calls;
    CountingHook(bool chief_only_hook, int* counter) : chief(chief_only_hook), calls(counter) {}
    bool chief_only() const override { return chief; }
    void after_step(RunContext&, const StepResult&) override { ++*calls; }
};

}  // namespace

TEST_CASE("a chief-only hook runs on the chief only", "[hooks]") {
    for (bool is_chief : {false, true}) {
        int all = 0, chief_only = 0;
        HookList hooks(is_chief);
        hooks.add(std::make_unique<CountingHook>(false, &all));
        hooks.add(std::make_unique<CountingHook>(true, &chief_only));
        RunContext ctx;
        hooks.after_step(ctx, StepResult{});
        hooks.after_step(ctx, StepResult{});
        CHECK(all == 2);
        CHECK(chief_only == (is_chief ? 2 : 0));
        CHECK(hooks.size() == (is_chief ? 2u : 1u));
    }
    RunContext worker;
    CHECK(make_hooks(worker).size() == 2);  // NaN guard and stop-at-step
    worker.chief = true;
    CHECK(make_hooks(worker).size() == 6);  // + checkpoint, evaluation, progress, summary
}

TEST_CASE("StopAtStepHook stops at psd's last step, not before", "[hooks]") {
    StopAtStepHook hook;
    RunContext ctx;
    ctx.last_step = 100;
    hook.after_step(ctx, StepResult{99, 10, 0.5f, false});
    CHECK_FALSE(ctx.stop);
    hook.after_step(ctx, StepResult{100, 11, 0.5f, false});
    CHECK(ctx.stop);
    RunContext finished;
    finished.last_step = 100;
    hook.after_step(finished, StepResult{42, 1, 0.5f, true});  // psd says the run is over
    CHECK(finished.stop);
}

TEST_CASE("NanGuardHook refuses a non-finite loss or gradient", "[hooks]") {
    omp_set_num_threads(1);
    const LabeledImages data = test::random_images(16, 7);
    TrainerConfig config = test::zoo_trainer_config("mnist_deep", 4);
    Trainer trainer(config, data, data);
    const float loss = trainer.compute_gradients();
    REQUIRE(std::isfinite(loss));
    RunContext ctx;
    ctx.trainer = &trainer;
    NanGuardHook guard;
    CHECK_NOTHROW(guard.before_step(ctx, loss));
    CHECK_THROWS_WITH(guard.before_step(ctx, std::numeric_limits<float>::quiet_NaN()),
                      Catch::Contains("non-finite loss"));
    trainer.grads().all()[12345] = std::numeric_limits<float>::infinity();
    CHECK_THROWS_WITH(guard.before_step(ctx, loss), Catch::Contains("non-finite gradient"));
}
}  // namespace psrun::worker

TEST_CASE("the ETA counts training time only: an evaluation in the window does not double it", "[hooks]") {
    using psrun::worker::eta_seconds;
    // 100 steps in a 10 s window of which 5 s were an evaluation: 20 steps/s of training.
    CHECK(eta_seconds(1000, 100, 10.0, 5.0) == Approx(50.0));
    CHECK(eta_seconds(1000, 100, 10.0, 0.0) == Approx(100.0));
    // No progress, or a window that was all evaluation: no rate, no ETA (never a division by zero).
    CHECK(eta_seconds(1000, 0, 10.0, 0.0) == 0.0);
    CHECK(eta_seconds(1000, 100, 5.0, 5.0) == 0.0);
    CHECK(eta_seconds(1000, 100, 5.0, 7.0) == 0.0);
    CHECK(eta_seconds(0, 100, 10.0, 2.0) == 0.0);
}
