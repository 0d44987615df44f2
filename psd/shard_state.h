// One psd's shard: its slices of the parameters, the optimizer state for them, the global step
// and the shard file. Owned and used by the server's poll-loop thread only.
//
// Slices of state tensors (TensorClass::kState) have no optimizer slots: apply() subtracts
// their gradient (the worker's g = old - new) from them, and the learning rate never touches them.
//
// Parameters are multi-buffered: a PARAMS reply hands the current buffer to ZeroMQ zero-copy,
// and an update never writes a buffer ZeroMQ still holds: it copies the current buffer into a
// free one first (with one worker the current buffer is always free again by the next push).
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/optimizer.h"
#include "common/result.h"
#include "common/tensor_layout.h"
#include "common/thread_team.h"
#include "common/wire.h"
#include "psd/data_chunks.h"
#include "psd/row_frames.h"
#include "psd/row_store.h"
#include "psd/weight_average.h"

namespace psrun::psd {

struct ParamBuffer {
    std::vector<float> data;
    std::atomic<int> holds{0};  // ZeroMQ messages still pointing into data
};

class ShardState {
  public:
    // `tensors`: the list `layout` was computed from (its fingerprint names the shard file).
    ShardState(ShardLayout layout, std::uint32_t shard, std::vector<TensorSpec> tensors);

    const ShardLayout& layout() const { return layout_; }
    const std::vector<std::uint32_t>& slice_ids() const { return slice_ids_; }
    std::size_t size() const { return size_; }
    std::size_t local_offset(std::size_t k) const { return local_offsets_[k]; }  // k: position in slice_ids()
    bool is_state(std::size_t k) const { return state_[k]; }  // own slice k belongs to a state tensor
    const std::vector<TensorSpec>& tensors() const { return tensors_; }
    bool initialized() const { return initialized_; }

    // New parameters (one span per own slice, in slice_ids() order): resets slots and step, and
    // starts this shard's rows of every sparse table afresh (created at first use, psd/row_store.h).
    void init(const wire::InitConfig& config, const std::vector<std::span<const float>>& params);
    // "Restored" INIT: keeps parameters, slots and step; adopts the new last_step (and the
    // optimizer config, resetting slots only if the optimizer kind changed).
    void restore(const wire::InitConfig& config);

    // Checkpoint access; k is a position in slice_ids(). Spans are valid until the next update.
    std::span<const float> param_slice(std::size_t k) const;
    std::vector<std::span<const float>> slot_slices(std::size_t k) const;  // slot_count(kind) spans; none for state
    std::uint64_t updates(std::size_t k) const;
    // The moving average of the parameters (OptimizerConfig::ema_decay; off when 0), updated by
    // every apply() that is not a dry run.
    const WeightAverage& average() const { return average_; }
    // Like init() (step = config.start_step) but for the sparse tables, which the caller filled
    // through rows() (RowStore::allocate() first); then sets each own slice's optimizer slots
    // (slots[k] empty: fresh slots) and update count, and the saved moving average (`average`:
    // one vector per slice, or empty: none saved, it restarts from the parameters).
    // REQUIRES: sizes match slice_ids().
    void load(const wire::InitConfig& config, const std::vector<std::span<const float>>& params,
              const std::vector<std::vector<std::vector<float>>>& slots, const std::vector<std::uint64_t>& updates,
              std::vector<std::vector<float>> average = {});

    // Marks the shard as holding no parameters (a restore that failed after it began to write).
    void invalidate() { initialized_ = false; }
    // An exception left a write (init, restore, load, apply) half-way: parameters, slots, rows or
    // step may be partly updated (psd/torn_guard.h). Stays true.
    bool torn() const { return torn_; }

    // Dry run (benchmarks): apply() only advances the step. Reset by init().
    void set_dry_run(bool dry_run) { dry_run_ = dry_run; }
    bool dry_run() const { return dry_run_; }
    // Applies one gradient (one span per own slice) with the optimizer and advances the step.
    // With a team (may be null) the update of large shards is split across its threads.
    // kLamb runs in two passes over the slices (common/lamb.h), with one trust ratio per own slice:
    // the norms of a tensor cut over several shards are each shard's slice's, not the tensor's.
    // A non-empty `mirror` (the whole model's flat buffer: a worker's shared-memory params
    // region) also receives the updated slices, block by block while they are in cache.
    // `rows`: the sparse gradient rows of the same update (checked by parse_row_frames()).
    void apply(const std::vector<std::span<const float>>& grads, ThreadTeam* team = nullptr,
               std::span<float> mirror = {}, std::span<const RowSlice> rows = {});
    // Applies sparse gradient rows alone, as one update of the tables (their optimizers' update
    // count advances), leaving the dense slices and the step as they are: a sync run whose tables
    // stay asynchronous (--async-tables) applies each worker's rows as they arrive. No rows: no update.
    void apply_rows(std::span<const RowSlice> rows);
    // This shard's rows of the sparse tables.
    RowStore& rows() { return rows_; }
    const RowStore& rows() const { return rows_; }
    // Writes the current values of this shard's slices into `full` (the whole model's flat
    // buffer) at their layout offsets, split across the team (may be null).
    void copy_params_to(std::span<float> full, ThreadTeam* team) const;

    std::uint64_t step() const { return step_; }
    std::uint64_t last_step() const { return last_step_; }
    bool finished() const { return last_step_ != 0 && step_ >= last_step_; }
    const wire::InitConfig& config() const { return config_; }

    // The buffer to send from; callers pair it with zero_copy_message(.., holds).
    ParamBuffer& current() { return *buffers_[current_]; }
    // Changes whenever the parameters may change (every write: init, load, a non-dry-run apply),
    // so that a copy derived from them (psd/bf16_params.h) knows when it is stale. Starts at 0.
    std::uint64_t version() const { return version_; }
    std::size_t buffer_count() const { return buffers_.size(); }
    std::size_t optimizer_floats() const;

    // Shard file: params, slots, step and optimizer config, and the sparse tables' rows, slots and
    // update counts, CRC32-protected; written atomically (psd/shard_state_file.cpp). `chunks`
    // (psd 0's data dispenser, may be null) is kept in the file too (psd/data_chunks_file.h's tensors).
    [[nodiscard]] Result<void> save(const std::string& path, const DataChunks* chunks = nullptr) const;
    // Everything is checked before the state changes, the dispenser's fields included: any damage
    // is an error naming the file and leaves the shard as it was (or uninitialised after a read
    // error). `chunks` (may be null) is set to the dispenser the file holds, nullopt when it holds
    // none (psd i > 0, a psd 0 without data chunks, a file from before version 9).
    [[nodiscard]] Result<void> load(const std::string& path, std::optional<DataChunks>* chunks = nullptr);

  private:
    float* writable();                                 // current buffer, or a free copy of it if ZeroMQ still holds it
    void update_rows(std::span<const RowSlice> rows);  // one update of the tables (apply's last part)
    void set_dense(const wire::InitConfig& config, const std::vector<std::span<const float>>& params);
    void make_optimizers();
    std::vector<std::span<const float>> param_slices() const;

    ShardLayout layout_;
    std::uint32_t shard_;
    std::vector<TensorSpec> tensors_;
    std::uint64_t fingerprint_;
    std::vector<std::uint32_t> slice_ids_;
    std::vector<bool> state_;  // per own slice: a state tensor's
    std::vector<std::size_t> local_offsets_;
    std::size_t size_ = 0;
    std::vector<std::unique_ptr<ParamBuffer>> buffers_;
    std::size_t current_ = 0;
    std::uint64_t version_ = 0;          // see version()
    std::vector<Optimizer> optimizers_;  // one per own slice, same order
    WeightAverage average_;              // see average()
    RowStore rows_;
    wire::InitConfig config_;
    std::uint64_t step_ = 0;
    std::uint64_t last_step_ = 0;
    bool initialized_ = false;
    bool dry_run_ = false;
    bool torn_ = false;  // see torn()
};

}  // namespace psrun::psd
