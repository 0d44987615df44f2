// The sparse tables' part of a psd shard's checkpoint file (psd/shard_checkpoint.h): for each
// table, this shard's rows as "<tensor>@<shard>%<K>/param" ([rows, width], rows r with
// r mod K == shard, ascending), "/slot<j>", "/ema" (with --ema-decay: the rows' moving average,
// psd/row_store.h, current at the update count) and "/state" (5 floats: optimizer kind, update
// count, class), written straight from the RowStore's arrays (common/tensor_file_stream.h).
// A keyed table's piece also holds "/keys" ([rows, kKeyedEntryFloats]: each row's raw id, slot and
// last update, as base-2^16 digits), and its arrays are by slot; a restore reads every source
// shard's id map and copies the rows keyed_owner() gives it (the most recently updated when they
// are more than its slots).
// A restore into K' shards reads, for each table, only the pieces of source shards s with
// s = s' (mod gcd(K, K')) (with K' = K: its own), in chunks, so that no process ever holds more
// than its own part of a table plus a fixed buffer. Poll-loop thread only.
#pragma once

#include <array>
#include <cstdint>
#include <map>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/tensor_file.h"
#include "common/tensor_file_stream.h"
#include "psd/shard_state.h"

namespace psrun::psd {

// The "state" part of a piece: optimizer kind, update count as base-2^24 digits, tensor class.
std::array<float, 5> piece_state(OptimizerKind kind, std::uint64_t updates, TensorClass tensor_class);
std::uint64_t piece_updates(std::span<const float> state);

// Which blocks of rows a checkpoint writes of each vocabulary table (common/row_delta.h,
// docs/sparse.md "Checkpoints"), one BlockSet per table of shard.rows(). A differential
// checkpoint's: `base_step` names the full checkpoint it builds on, the blocks are those changed
// since that one's snapshot (RowStore::dirty()). A whole one's (no base_step): the blocks holding
// a created row (RowStore::created_blocks()), every other row holding its initial values; where
// that is every block the piece is written plainly. Keyed tables are written whole all the same.
struct RowBlocks {
    std::optional<std::uint64_t> base_step;
    std::vector<RowStore::BlockSet> blocks;
};

// Appends views of this shard's row pieces (their state parts go to `states`, keyed tables' id maps
// to `keys`; both, and `shard`, must outlive the views). A vocabulary table's views read it as
// materialize() would leave it while they are written (RowStore::read(): no row is created);
// a keyed table's arrays as they are (REQUIRES: RowStore::catch_up_keyed() with --ema-decay).
// A table holding NaN or Inf is refused (kInvalidArgument): a keyed one here, a vocabulary one
// by the write, which then stops. With `snapshot`, the vocabulary tables are read through the
// RowStore's snapshot (RowStore::read_snapshot(), from another thread). With `plan`, a vocabulary
// table's pieces hold only the blocks it lists (the views keep what they need of it).
[[nodiscard]] Result<void> add_row_pieces(const ShardState& shard, const std::vector<TensorSpec>& tensors,
                                          bool snapshot, const RowBlocks* plan, std::vector<TensorView>& views,
                                          std::vector<std::array<float, 5>>& states,
                                          std::vector<std::vector<float>>& keys);

// A keyed table's id map as floats (psd/shard_checkpoint_keyed.cpp): id (4 digits), slot (2), last
// update (4), each digit base 2^16; decoding refuses a digit that is not one or a slot at or beyond
// `capacity`, naming `where`.
inline constexpr std::size_t kKeyedEntryFloats = 10;
std::vector<float> encode_keyed_entries(std::span<const RowIndex::Entry> entries);
[[nodiscard]] Result<std::vector<RowIndex::Entry>> decode_keyed_entries(std::span<const float> floats,
                                                                        std::uint64_t capacity,
                                                                        const std::string& where);

struct RowPiece {  // one source shard's part of a table: entries in its file
    std::size_t file = 0;
    int param = -1, state = -1, ema = -1;
    int keys = -1;               // a keyed table's id map
    int blocks = -1, base = -1;  // a differential piece's (common/row_delta.h)
    int rows = -1;               // with blocks and no base: a whole piece written by blocks
    bool by_blocks() const { return blocks >= 0 && base < 0; }
    std::vector<int> slots;
};
// tensor name -> source shard count K -> source shard -> piece
using RowPieces = std::map<std::string, std::map<std::uint32_t, std::map<std::uint32_t, RowPiece>>>;
// Records entry `entry` of file `file` when it is a row piece (true); false when it is not one.
[[nodiscard]] Result<bool> index_row_piece(const TensorFileEntry& t, std::size_t file, std::size_t entry,
                                           const std::string& where, RowPieces& pieces);

// Differential pieces (common/row_delta.h) by tensor and source shard.
using RowDeltas = std::map<std::string, std::map<std::uint32_t, RowPiece>>;
// Replaces each differential piece of `pieces` with its base's piece (the file of the same name in
// the base checkpoint, opened into `files` and `names`, as "../ckpt-<step>/<file>") and returns
// them, to be laid over the base rows by load_row_deltas(); each differential piece's file is
// verified. kInvalidArgument when a file is damaged, a base is
// named wrong or does not hold the piece whole; kNotFound when it is gone.
[[nodiscard]] Result<RowDeltas> resolve_row_deltas(const std::string& dir, std::vector<std::string>& names,
                                                   std::vector<TensorFileReader>& files, RowPieces& pieces);

struct RowRestorePlan {
    struct Table {
        std::uint32_t source_shards = 0;
        RowTable source;                      // the table as the checkpoint placed it (placement_from_pieces)
        std::vector<const RowPiece*> pieces;  // by source shard; null where not needed
        bool slots = false;                   // the saved slots are loaded (same optimizer kind)
        bool average = false;                 // the saved moving average is loaded (--ema-decay, all pieces)
        std::uint64_t updates = 0;            // the largest count of the pieces read
        bool lazy = false;  // a piece read lists blocks (RowPiece::by_blocks()): the rows it omits start afresh
        // By source shard: the local rows a piece written by blocks stores, in order (its block list
        // decoded and checked); empty for the others.
        std::vector<std::vector<std::uint64_t>> listed;
    };
    std::vector<Table> tables;  // as shard.rows()
};
// Checks everything a restore of the shard's tables needs (pieces present and complete, shapes,
// class, every needed file's CRCs, values finite) without changing the shard.
[[nodiscard]] Result<RowRestorePlan> plan_row_restore(const ShardState& shard, const std::vector<TensorSpec>& tensors,
                                                      const wire::InitConfig& config, const std::string& dir,
                                                      const std::vector<std::string>& names,
                                                      std::vector<TensorFileReader>& files, const RowPieces& pieces);
// Allocates the shard's tables for `config` and fills them as planned (fresh slots where the plan
// loads none; with --ema-decay, an average restarted from the rows where it loads none). Errors only on a read failure.
[[nodiscard]] Result<void> load_rows(ShardState& shard, const wire::InitConfig& config,
                                     const std::vector<TensorFileReader>& files, const RowRestorePlan& plan);
// After load_rows(): the rows of every differential piece the plan reads (resolve_row_deltas()
// verified their files), and their update count. Errors: a damaged or misshaped piece, a read failure.
[[nodiscard]] Result<void> load_row_deltas(ShardState& shard, const std::vector<TensorSpec>& tensors,
                                           std::vector<TensorFileReader>& files, const RowRestorePlan& plan,
                                           const RowDeltas& deltas);
// load_rows()' part for a piece written by blocks (source shard s of table t, in `file`): its
// `parts` (values, then slots, then average) copied to `destinations` for the rows it lists
// (tp.listed[s]) that this shard owns, each marked created (RowStore::mark_created()).
[[nodiscard]] Result<void> load_listed_rows(RowStore& rows, std::size_t t, const RowRestorePlan::Table& tp,
                                            std::uint32_t s, const TensorFileReader& file, std::span<const int> parts,
                                            std::span<const std::span<float>> destinations);
// load_rows()' part for keyed table t (after RowStore::allocate()): every source piece's id map
// read, this shard's rows copied to fresh slots, the index restored.
[[nodiscard]] Result<void> load_keyed_rows(RowStore& rows, std::size_t t, const RowRestorePlan::Table& plan,
                                           const std::vector<TensorFileReader>& files);

}  // namespace psrun::psd
