// A psd shard's part of a coordinated checkpoint (docs/protocol.md "Checkpoints").
// One tensor file per shard, <dir>/ps-<i>-of-<K>.tensors (common/tensor_file.h, CRC32C per
// tensor), holding for every own slice "<tensor>@<offset>+<length>/<part>" with part
//   param            the slice's parameters
//   slot0, slot1     the optimizer's slot vectors (as many as the optimizer kind keeps)
//   state            5 floats: optimizer kind, update count in base-2^24 digits (lo, mid, hi),
//                    tensor class (0 trainable, 1 state; files without it hold 4 floats: trainable)
// A state tensor's slices have no slots. Sparse tables are stored per shard as
// "<tensor>@<shard>%<K>/<part>" (psd/shard_checkpoint_rows.h). Files are written and read as
// streams (common/tensor_file_stream.h): a psd holds at most its own part of a table.
// Because pieces are named by tensor ranges, a restore with any shard count finds its slices in
// whichever files hold them. Free functions, called on the psd poll-loop thread.
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <stop_token>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/tensor_file.h"
#include "common/tensor_layout.h"
#include "common/wire.h"
#include "psd/shard_checkpoint_rows.h"
#include "psd/shard_state.h"

namespace psrun::psd {

std::string shard_checkpoint_name(std::uint32_t shard, std::uint32_t num_shards);

// Writes this shard's file into `dir` (which must exist), fsynced. Refuses (kInvalidArgument,
// nothing written) when a parameter or slot is NaN/Inf; kIo (partial file removed) on a write
// failure such as a full disk or `dir` not being a directory. With `delta`, the vocabulary
// tables' pieces are differential (psd/shard_checkpoint_rows.h RowBlocks).
[[nodiscard]] Result<void> save_shard_checkpoint(const ShardState& shard, const std::vector<TensorSpec>& tensors,
                                                 std::uint32_t index, const std::string& dir,
                                                 const RowBlocks* delta = nullptr);

// The same file taken now and written later by another thread, while the poll loop goes on
// (psd/thread_task.h): take() checks and copies the dense slices and prepares the rows to be read
// through the RowStore's snapshot (the caller calls RowStore::begin_snapshot() right after it,
// before the store changes, with `delta`'s blocks, and end_snapshot() once write() has returned). take() refuses as
// save_shard_checkpoint() does; write() as it does, and with kIo when `stop` is requested.
// The shard outlives the image.
class ShardCheckpointImage {
  public:
    [[nodiscard]] static Result<std::unique_ptr<ShardCheckpointImage>> take(const ShardState& shard,
                                                                            const std::vector<TensorSpec>& tensors,
                                                                            std::uint32_t index, const std::string& dir,
                                                                            const RowBlocks* delta = nullptr);
    [[nodiscard]] Result<void> write(std::stop_token stop) const;

    struct Parts {  // the views and what they point into (each vector filled before any view of it)
        std::vector<TensorView> views;
        std::vector<std::vector<float>> copies;
        std::vector<std::array<float, 5>> states, row_states;
        std::vector<std::vector<float>> keys;
    };

  private:
    ShardCheckpointImage() = default;
    std::string path_;
    Parts parts_;
};

// Loads every own slice (params, slots, update counts) and this shard's rows of every sparse
// table (re-sharded when the checkpoint was written by another shard count) from the shard files
// in `dir`, verifying the CRCs of every file it reads, then initialises `shard` with `config`
// (ShardState::load). If the saved optimizer kind differs from config's, slots start fresh
// (logged). On any error found by the checks `shard` is unchanged; should a read fail after
// them (a file changed meanwhile), the shard is left uninitialised.
[[nodiscard]] Result<void> load_shard_checkpoint(ShardState& shard, const std::vector<TensorSpec>& tensors,
                                                 const wire::InitConfig& config, const std::string& dir);

}  // namespace psrun::psd
