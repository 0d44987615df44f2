// Coordinated checkpoints of the psd shards, driven by the chief (docs/protocol.md "Checkpoints").
//
// save(): CheckpointStore::begin(step) makes a hidden temp dir in the model dir; every psd gets
// SAVE(step, temp dir) and writes its shard (parameters, optimizer slots, update counts, named
// "<tensor>@<offset>+<length>/param|slot0|slot1|state") as ps-<i>-of-<K>.tensors with CRC32C per
// tensor, fsynced; once every shard ACKed, the manifest (layout, step, optimizer, `extra`) is
// written and the dir renamed to ckpt-<step> atomically. Any shard's ERROR (disk full, NaN
// parameters, bad path) aborts: the temp dir is removed and the previous checkpoint stays valid.
//
// restore(): the newest checkpoint whose every file verifies (damaged newer ones are skipped
// with a warning naming the file), then RESTORE(dir, init config) to every psd: each loads its
// slices from whichever shard files hold them (any saved shard count) and counts as
// initialised, exactly like after INIT (waiting PULLs are released).
//
// start_save() + poll(): the same save without stalling the chief (psd's forked writers write
// while training goes on, docs/protocol.md "Save flow"): SAVE goes with kFlagBackground and is
// answered at once; poll(), called after every step, asks the shards still writing (at most
// every kPollInterval) and writes the manifest once all are done. The checkpoint holds the
// parameters as each shard held them when its SAVE arrived, and `extra` as given to start_save().
// save() supersedes a background save of an earlier step.
//
// The model dir must be on a filesystem every psd can write (shared FS across nodes).
// Not thread-safe: one thread (the chief's) drives a Checkpointer and its PsClient.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/checkpoint_store.h"
#include "common/ps_client.h"
#include "common/result.h"
#include "common/wire.h"

namespace psrun {

struct CheckpointerOptions {
    std::string model_dir;          // absolute path recommended; made absolute internally
    int keep = 5;                   // --keep-checkpoints (>= 1)
    double every_secs = 600;        // --checkpoint-secs; <= 0: never by time
    std::uint64_t every_steps = 0;  // --checkpoint-steps; 0: never by steps
    // Optimizer config and last_step of this run: recorded in each manifest, and sent with
    // RESTORE (start_step is replaced by the checkpoint's step).
    wire::InitConfig init;
    // The model this run trains: {"name", "hash", "description"} (the description a worker can
    // rebuild the network from, workerd/nn/model_summary.h: model_json()). Recorded in each
    // manifest; restore() refuses a checkpoint of another model (other hash). Null: not checked.
    nlohmann::json model;
};

struct RestoredInfo {
    std::uint64_t step = 0;  // global step the shards now hold
    std::string dir;         // the checkpoint directory used
    nlohmann::json extra;    // what save() was given (data position, ...), or null
    // The optimizer and learning-rate schedule the manifest records (read_optimizer), if readable.
    // The shards continue with this run's CheckpointerOptions::init (a difference is warned about).
    std::optional<OptimizerConfig> optimizer;
    std::vector<std::string> warnings;  // damaged newer checkpoints that were skipped (also logged)
};

class Checkpointer {
  public:
    explicit Checkpointer(CheckpointerOptions options);

    // Coordinated save of every shard at `global_step` (REQUIRES: client.hello() done and the
    // shards initialised). `extra` is stored verbatim in the manifest under "extra". Blocks
    // until every shard has replied (client reply_timeout). On error nothing visible changes.
    // A background save under way of the same step is finished (poll(wait)) and is the result;
    // one of an earlier step is abandoned (psd kills its writer): this one supersedes it, and a
    // final or preemption checkpoint does not wait for an older write.
    [[nodiscard]] Result<CheckpointInfo> save(PsClient& client, std::uint64_t global_step,
                                              nlohmann::json extra = nlohmann::json::object());

    // Starts a background save at `global_step` (REQUIRES: !saving()). Returns the checkpoint
    // when every shard wrote it before answering (psd --checkpoint-in-loop), else nullopt:
    // saving() until poll() commits it. Errors as save()'s (counted the same way).
    [[nodiscard]] Result<std::optional<CheckpointInfo>> start_save(PsClient& client, std::uint64_t global_step,
                                                                   nlohmann::json extra = nlohmann::json::object());
    // The background save: asks the shards still writing (not within kPollInterval of the last
    // asking, unless `wait`: then until all are done) and commits the checkpoint once they all
    // are. nullopt: still writing (or nothing under way). An error ends the save (counted).
    [[nodiscard]] Result<std::optional<CheckpointInfo>> poll(PsClient& client, bool wait = false);
    bool saving() const { return background_.has_value(); }
    // Drops a background save (the shards restarted: ps_recovery restores instead).
    void abandon();
    static constexpr std::chrono::milliseconds kPollInterval{100};

    // Loads the newest valid checkpoint into every shard (REQUIRES: client.hello() done).
    // nullopt: the model dir holds no valid checkpoint (the caller sends INIT as usual).
    // Errors: kInvalidArgument when the checkpoint holds another model (naming both) or lies
    // beyond the last step; otherwise a shard refused (e.g. a file damaged after
    // latest_valid() checked it).
    [[nodiscard]] Result<std::optional<RestoredInfo>> restore(PsClient& client);

    // True when a checkpoint is due at `global_step`: never while saving() (but at `last`),
    // `last` (the run's final step) always,
    // else every_steps since the last save/restore or every_secs since then; never twice
    // for the same step. After a failed save() (disk full), no periodic checkpoint is due until
    // retry_in() has passed: 1 s after the first failure in a row, doubling up to 300 s.
    bool due(std::uint64_t global_step, bool last = false) const;

    std::optional<std::uint64_t> last_saved_step() const { return last_step_; }
    std::uint64_t failures() const { return failures_; }           // failed save() calls in this run
    const std::string& last_error() const { return last_error_; }  // the newest failure's message
    // The wait after the newest failure before a periodic save is due again (0 after a success).
    std::chrono::milliseconds retry_in() const;

  private:
    struct Background {
        PendingCheckpoint pending;
        std::uint64_t step;
        nlohmann::json extra;
        std::chrono::steady_clock::time_point started;
        std::vector<std::uint32_t> writing;           // shards that have not said they are done
        std::chrono::steady_clock::time_point asked;  // the newest poll
    };
    // The manifest of the written shard files, and the state a successful save sets.
    Result<CheckpointInfo> commit(PsClient& client, PendingCheckpoint& pending, std::uint64_t global_step,
                                  nlohmann::json extra, std::chrono::steady_clock::time_point started);
    // Counts a failed save; returns `error`.
    Error failed(Error error);
    // The background save, taken out (logged as abandoned): its directory goes when the caller
    // drops it, once nothing writes there any more.
    std::optional<Background> supersede();

    std::optional<Background> background_;

    CheckpointerOptions options_;
    CheckpointStore store_;
    std::optional<std::uint64_t> last_step_;
    std::chrono::steady_clock::time_point last_time_;
    std::chrono::steady_clock::duration stopped_at_last_;  // PauseDetector::stopped_total() at last_time_
    std::uint64_t failures_ = 0;
    std::uint32_t failures_in_row_ = 0;                  // since the last successful save
    std::chrono::steady_clock::time_point failed_at_{};  // the newest failure
    std::string last_error_;
};

// The manifest's description of the layout and optimizer (also used by tests).
nlohmann::json describe_layout(const ShardLayout& layout, const std::vector<TensorSpec>& tensors);
nlohmann::json describe_optimizer(const wire::InitConfig& init);
// The model a manifest records; a manifest written before models were recorded held TF's
// mnist_deep (the only model then): {"name": "mnist_deep"} without hash or description.
nlohmann::json manifest_model(const nlohmann::json& manifest);
// The inverse of describe_optimizer (start_step 0). A manifest without "lr_schedule" (written
// before schedules existed) reads as a constant schedule: decay_rate/decay_steps, as then; one
// without weight_decay, weight_decay_on or clip_global_norm reads as no decay and no clipping.
[[nodiscard]] Result<wire::InitConfig> read_optimizer(const nlohmann::json& optimizer);

}  // namespace psrun
