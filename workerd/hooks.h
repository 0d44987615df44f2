// The distributed worker's training-loop hooks (MonitoredTrainingSession's SessionRunHook, made
// small): begin, before_step (gradients computed, not yet pushed), after_step (psd replied),
// end. A chief-only hook is skipped on the other workers. Hooks run on the training thread, in
// the order they were added; a hook stops the run by setting RunContext::stop, and aborts it
// (this worker exits 1) by throwing.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/checkpointer.h"
#include "common/event_writer.h"
#include "common/metrics_log.h"
#include "common/ps_client.h"
#include "common/result.h"
#include "workerd/eval_metrics.h"
#include "workerd/step_times.h"
#include "workerd/train_options.h"
#include "workerd/trainer.h"

namespace psrun::worker {

using Clock = std::chrono::steady_clock;

// One finished step, as seen by this worker.
struct StepResult {
    std::uint64_t global_step = 0;  // global step in psd's reply (after this push)
    std::uint64_t local_step = 0;   // steps this worker has pushed in this run
    float loss = 0;                 // mean loss of this worker's batch
    bool finished = false;          // psd: last_step reached
};

// State shared by the hooks of one run. Pointers are non-owning and outlive the run.
struct RunContext {
    const TrainOptions* options = nullptr;
    Trainer* trainer = nullptr;
    PsClient* client = nullptr;            // for heartbeats during long waits
    MetricsLog* metrics = nullptr;         // chief with --model-dir only
    EventWriter* events = nullptr;         // chief with --model-dir only
    Checkpointer* checkpointer = nullptr;  // chief with --model-dir only
    std::uint32_t index = 0;
    std::uint32_t num_workers = 1;
    bool chief = false;
    std::uint64_t start_step = 0;   // global step when this worker started training
    std::uint64_t last_step = 0;    // --steps
    Clock::time_point start{};      // when training started (after the barrier)
    std::uint64_t local_steps = 0;  // steps this worker has pushed so far
    double train_seconds = 0;       // start to the end of the last step (set before end())
    double compute_seconds = 0;     // in compute_gradients() and before_step hooks
    double exchange_seconds = 0;    // in PUSH_PULL round trips
    double copy_seconds = 0;        // copying received parameters into the model's buffer
    StepTimes step_times;           // each step's time, end to end (StepLoop)
    bool stop = false;              // set by a hook: leave the loop after this step
    std::optional<Error> aborted;   // set by a hook: psd stopped the run (kAborted); the worker fails
    bool stopped_by_signal = false;
    // True once a stop signal arrived (the loop leaves after this step): evaluations and periodic
    // checkpoints are skipped then, the preemption checkpoint follows (workerd/preemption.h).
    std::function<bool()> interrupted;
    double test_accuracy = -1;                // latest evaluation's score() (-1: none yet, or regression)
    std::optional<EvalMetrics> test_metrics;  // latest evaluation, every figure
    std::uint64_t accuracy_step = 0;          // global step of that evaluation
    double eval_seconds = 0;
    nlohmann::json evaluations = nlohmann::json::array();
    // --ema-decay: the final evaluation of psd's moving average of the weights, read from the
    // last checkpoint (EvalHook::end); and that checkpoint, set by CheckpointHook.
    std::optional<EvalMetrics> average_metrics;
    std::optional<CheckpointInfo> last_checkpoint;
    // The chief's: summary.json's keys read from psd's STATS before the final evaluation and DONE
    // ("elastic", "staleness", "keyed_tables": workerd/ps_figures.h); null otherwise.
    nlohmann::json ps_figures;

    double elapsed() const { return std::chrono::duration<double>(Clock::now() - start).count(); }
};

class Hook {
  public:
    virtual ~Hook() = default;
    virtual bool chief_only() const { return false; }
    virtual void begin(RunContext& /*ctx*/) {}
    virtual void before_step(RunContext& /*ctx*/, float /*loss*/) {}
    virtual void after_step(RunContext& /*ctx*/, const StepResult& /*step*/) {}
    // `last` is the last finished step (global_step = start_step when no step ran).
    virtual void end(RunContext& /*ctx*/, const StepResult& /*last*/) {}
};

class HookList {
  public:
    explicit HookList(bool chief) : chief_(chief) {}
    // Keeps `hook` unless it is chief-only and this worker is not the chief.
    void add(std::unique_ptr<Hook> hook);
    void begin(RunContext& ctx);
    void before_step(RunContext& ctx, float loss);
    void after_step(RunContext& ctx, const StepResult& step);
    void end(RunContext& ctx, const StepResult& last);
    std::size_t size() const { return hooks_.size(); }

  private:
    bool chief_;
    std::vector<std::unique_ptr<Hook>> hooks_;
};

// Stops the loop once psd reports the last step (StopAtStepHook with last_step: the psd refuses
// updates past it, so the global step never overshoots --steps).
class StopAtStepHook : public Hook {
  public:
    void after_step(RunContext& ctx, const StepResult& step) override;
};

// Refuses to push a non-finite loss or gradient: throws (the worker exits 1) naming the step.
class NanGuardHook : public Hook {
  public:
    void before_step(RunContext& ctx, float loss) override;
};

// The hooks every worker runs, then the chief's duties (see chief_hooks.h), in order.
HookList make_hooks(const RunContext& ctx);

}  // namespace psrun::worker
