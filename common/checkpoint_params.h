// Reading a coordinated checkpoint back as one full parameter vector (the evaluator's view).
// A committed ckpt-<step>/ directory (common/checkpoint_store.h) holds one tensor file per psd
// shard, ps-<i>-of-<K>.tensors, whose pieces are named "<tensor>@<offset>+<length>/<part>"
// (psd/shard_checkpoint.h). This assembles every "param" piece of the files the manifest lists
// into the contiguous buffer of the dense `tensors` (list order, as in common/tensor_layout.h),
// whatever the shard count K was. Optimizer slots and update counts are ignored.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/tensor_layout.h"

namespace psrun {

// The name of one saved piece of a tensor in a shard's tensor file:
// "<tensor>@<offset>+<length>/<part>", part = "param", "slot<j>" or "state".
struct PieceName {
    std::string tensor;
    std::uint64_t offset = 0;  // floats into the tensor
    std::uint64_t length = 0;  // floats, > 0
    std::string part;
};
// "<tensor>@<offset>+<length>": a piece's name without its "/<part>".
std::string piece_base_name(const std::string& tensor, std::uint64_t offset, std::uint64_t length);
// False for any name that is not exactly that grammar (decimal digits, at most 19 each).
[[nodiscard]] bool parse_piece_name(const std::string& name, PieceName& out);

// The name of one shard's part of a sparse table (rows tensor) in its tensor file:
// "<tensor>@<shard>%<shards>/<part>": the rows r with r mod shards == shard, ascending, as a
// [rows, width] tensor; part = "param", "slot<j>" or "state".
struct RowPieceName {
    std::string tensor;
    std::uint32_t shard = 0;
    std::uint32_t shards = 0;  // > shard
    std::string part;
};
std::string row_piece_base_name(const std::string& tensor, std::uint32_t shard, std::uint32_t shards);
[[nodiscard]] bool parse_row_piece_name(const std::string& name, RowPieceName& out);

// Which values of the dense tensors to assemble: the parameters ("param" pieces) or psd's moving
// average of them ("ema" pieces, written with --ema-decay: psd/weight_average.h). Sparse tables
// read into a dense tensor give their rows' "param" pieces or, with kAverage, their rows' average
// ("<table>@<s>%<K>/ema" pieces, psd/row_store.h), which equals the dense average of the table.
enum class CheckpointValues { kParameters, kAverage };

struct CheckpointParameters {
    std::int64_t step = 0;      // the manifest's "step"
    std::uint32_t shards = 0;   // tensor files read
    std::vector<float> values;  // dense_elements(tensors) floats, dense tensors in list order
};

// Reads <dir>/manifest.json and every file it lists, verifying each tensor's CRC32C, streaming
// (constant memory besides the result). Sparse tables (rows tensors) are not assembled: they
// live only on psd; their pieces are skipped.
// Errors (nothing is returned half-filled): kNotFound when the directory or manifest is missing;
// kInvalidArgument naming the file when a file is damaged, a piece names an unknown tensor or
// lies outside it, two pieces overlap, some float of some tensor is in no piece, or a value is
// NaN/Inf; with kAverage, kNotFound when the checkpoint holds no average (trained without
// --ema-decay), or a sparse table's rows have none (a checkpoint older than their average). Thread-safe (no shared
// state); reads up to a few tens of MB.
[[nodiscard]] Result<CheckpointParameters> load_checkpoint_parameters(
    const std::string& dir, const std::vector<TensorSpec>& tensors,
    CheckpointValues values = CheckpointValues::kParameters);

}  // namespace psrun
