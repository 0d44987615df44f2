// `workerd --evaluator --model-dir D [--steps LAST] [training options]`: TF's evaluator task.
// The model is the one the checkpoints record (common/checkpointer.h): a --model given on the
// command line must be the same (exit 2 otherwise, naming both); data options still apply.
// It never joins the training (no PUSH, not in psd's start barrier or done-queue): it watches
// D for committed checkpoints (common/checkpoint_store.h), loads each new one's parameters
// (common/checkpoint_params.h), evaluates them on the test set, appends
//   {"step", "time", "test_accuracy", "checkpoint", "load_seconds", "eval_seconds"}
// to D/eval/metrics.jsonl, writes the scalar "test_accuracy" to TensorBoard event files in
// D/eval/ (a separate "eval" run next to the chief's) and logs one line per checkpoint.
// Evaluator i > 0 (--index i) writes D/eval-<i>/ instead, so two never share files.
//
// Rules (docs/running.md "Evaluator"):
//  - every committed checkpoint it sees is evaluated once, oldest first; steps already in
//    D/eval/metrics.jsonl (an earlier evaluator of the same model dir) are not evaluated again;
//    a damaged checkpoint is skipped with a warning (and not retried);
//  - exit 0 after evaluating a checkpoint of step >= --steps (the chief always writes one at
//    the last step), or on SIGINT/SIGTERM after one final look for new checkpoints;
//  - while it waits, it probes the job's psd (--ps, a STATS request as a tool: never counted as
//    a worker) every 5 s (eval_timeout / 3 if less); a running job is waited for however long its checkpoints take;
//  - exit 1 when the psd answered before and now stopped answering twice in a row and a last
//    look found no checkpoint of the last step (the job is over without its last checkpoint), or
//    after --eval-timeout seconds with neither a new checkpoint nor an answer from psd (psd never
//    reachable, or no --ps given). The message says which.
// Call block_termination_signals() first. Not thread-safe except stop().
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <set>
#include <string>

#include <CLI/CLI.hpp>

#include "common/checkpoint_store.h"
#include "common/event_writer.h"
#include "common/job_keys.h"
#include "common/metrics_log.h"
#include "common/signals.h"
#include "workerd/datasets.h"
#include "workerd/distributed.h"
#include "workerd/train_options.h"
#include "workerd/trainer.h"

namespace psrun::worker {

struct EvaluatorOptions {
    double eval_timeout = 600;  // seconds without a new checkpoint or psd answer before giving up (exit 1)
    double poll_interval = 1;   // seconds between looks at the model dir
    double probe_interval = 5;  // seconds between psd liveness probes while idle (at most eval_timeout / 3)
};

// Registers --eval-timeout and --eval-poll (accepted, and ignored, by the other roles too).
void add_evaluator_options(CLI::App& app, EvaluatorOptions& options);

class Evaluator {
  public:
    // cluster: --index, --ps and --key-file/--no-auth (for the liveness probe; --ps may be
    // empty: then only --eval-timeout ends a wait). training: --model-dir (required), --steps,
    // data and model options.
    Evaluator(ClusterOptions cluster, TrainOptions training, EvaluatorOptions options);

    // Returns the exit code (see above). Throws UsageError on bad options (no --model-dir).
    int run();
    // Asks run() to finish as after SIGTERM (final look, exit 0). Thread-safe.
    void stop();

  private:
    struct Outcome {
        bool reached_last = false;  // a checkpoint of step >= --steps was evaluated
        bool found_new = false;     // a checkpoint not seen before (evaluated or damaged)
        int exit_code = -1;         // >= 0: stop with this code (another model, bad data)
    };
    // Evaluates every committed checkpoint not seen yet, oldest first.
    Outcome evaluate_new(MetricsLog& metrics, EventWriter& events);
    // The trainer for the model `info`'s manifest records, built (with the data) at the first
    // checkpoint. Errors: another model than --model or than the first checkpoint's (skip),
    // data that does not fit (fatal: the caller exits with data_error_exit_code()).
    Result<Trainer*> trainer_for(const CheckpointInfo& info, bool& fatal);
    // The wait loop of run(): evaluates, probes psd, handles signals; returns the exit code.
    int watch(MetricsLog& metrics, EventWriter& events, SignalFd& signals, bool can_probe);
    // True when every psd answered a tool's STATS; false when one did not.
    bool psd_alive() const;
    void read_previous_steps(const std::string& path);

    ClusterOptions cluster_;
    TrainOptions training_;
    EvaluatorOptions options_;
    std::optional<JobKeys> keys_;
    std::unique_ptr<Datasets> data_;    // loaded with the first checkpoint's model
    std::unique_ptr<Trainer> trainer_;  // for that model; later checkpoints must hold the same
    std::string model_dir_;             // absolute
    std::set<std::int64_t> seen_;       // evaluated or skipped steps
    std::int64_t last_evaluated_ = -1;
    WakeFd wake_;
    std::atomic<bool> stop_requested_{false};
};

}  // namespace psrun::worker
