// The chief's duties as hooks: progress line, periodic validation on the test set, metrics
// (<model-dir>/metrics.jsonl and TensorBoard events), and on exit summary.json + curves.png.
// Every hook here is chief-only. Metrics and events are written only when RunContext holds
// their writers (the chief was given --model-dir).
#pragma once

#include <cstdint>

#include "workerd/hooks.h"

namespace psrun::worker {

// Every --log-every global steps: "step G/N  X img/s (this worker)  Y img/s (all)  loss L  ETA",
// and a metrics record {loss, images_per_sec, worker_images_per_sec}.
// Seconds until `remaining` more global steps at the rate of the last window: `steps` global
// steps in `window_seconds` of wall time of which `eval_seconds` were the chief's evaluations
// (they are not training, so the ETA does not jump around an evaluation). 0 without a rate.
double eta_seconds(std::uint64_t remaining, std::uint64_t steps, double window_seconds, double eval_seconds);

class ProgressHook : public Hook {
  public:
    bool chief_only() const override { return true; }
    void begin(RunContext& ctx) override;
    void after_step(RunContext& ctx, const StepResult& step) override;
    void end(RunContext& ctx, const StepResult& last) override;

  private:
    Clock::time_point window_start_{};
    std::uint64_t window_global_ = 0;  // global step at the window's start
    std::uint64_t window_local_ = 0;   // local steps in the window
    double window_loss_ = 0;
    double window_eval_seconds_ = 0;  // ctx.eval_seconds at the window's start
    double last_aggregate_ips_ = 0;
};

// Test-set accuracy every --eval-every global steps (0: only at the end) and at the end (the
// final evaluation is of the parameters at the last global step). Heartbeats psd around each
// evaluation, records {test_accuracy} metrics and a test_accuracy event.
class EvalHook : public Hook {
  public:
    bool chief_only() const override { return true; }
    void after_step(RunContext& ctx, const StepResult& step) override;
    void end(RunContext& ctx, const StepResult& last) override;

  private:
    void evaluate(RunContext& ctx, std::uint64_t global_step);
    // --ema-decay: evaluates the moving average the final checkpoint holds (RunContext::average_metrics).
    void evaluate_average(RunContext& ctx, const StepResult& last);
    std::uint64_t last_eval_ = 0;  // global step of the last evaluation
};

// On end: <model-dir>/summary.json (global_step, test_accuracy, images_per_sec, train_seconds,
// workers, evaluations, checkpoint_step (the newest step a checkpoint holds), checkpoint_failures,
// checkpoint_error, metrics_records_lost, ema_test_accuracy (--ema-decay), ...) and curves.png. Failures are logged; a
// missing plot is a warning.
class SummaryHook : public Hook {
  public:
    bool chief_only() const override { return true; }
    void end(RunContext& ctx, const StepResult& last) override;
};

// Saves a coordinated checkpoint of every psd shard when RunContext's Checkpointer says one is
// due (every --checkpoint-secs / --checkpoint-steps, and at the last step). A failed save is
// logged once, with the error, and training goes on: the previous checkpoint stays valid, and
// the next periodic try waits the Checkpointer's backoff (the final step is always tried).
class CheckpointHook : public Hook {
  public:
    bool chief_only() const override { return true; }
    void after_step(RunContext& ctx, const StepResult& step) override;
};

// Appends the chief's hooks to `hooks` in their order.
void add_chief_hooks(HookList& hooks);

}  // namespace psrun::worker
