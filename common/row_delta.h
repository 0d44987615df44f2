// Differential pieces of a sparse table in a checkpoint (docs/sparse.md "Checkpoints"). A row
// piece "<table>@<s>%<K>/..." (common/checkpoint_params.h) is a delta when it has a "blocks" part:
// its "param" and "slot<j>" parts then hold only the rows of the blocks that part lists (blocks of
// kRowDeltaBlockRows local rows of source shard s, ascending; the piece's last block may be
// shorter), and its "base" part names the full checkpoint of the same shard count that holds
// every other row: the sibling directory ckpt-<base step> of the checkpoint (one level: a base is
// never a delta). A reader loads the base piece, then lays the delta's rows over it.
// A whole piece may be written by blocks too: a "blocks" part and, instead of "base", a "rows"
// part holding the source shard's row count; then the rows its blocks do not list hold their
// initial values (the table's row_init in the manifest's layout: common/checkpointer.cpp) and
// fresh optimizer slots: rows no step created are neither computed nor written. Such a piece may
// be a delta's base.
// Numbers are stored as floats in base-2^24 digits (exact), two digits each: values < 2^48.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/tensor_file_stream.h"

namespace psrun {

inline constexpr std::uint64_t kRowDeltaBlockRows = 16;

// Block indices as the "blocks" part holds them ([blocks, 2]: low digit, high digit).
std::vector<float> encode_row_delta_blocks(std::span<const std::uint64_t> blocks);
// The "base" part ([2]) for the base checkpoint's step.
std::vector<float> encode_row_delta_base(std::uint64_t base_step);
[[nodiscard]] Result<std::uint64_t> decode_row_delta_base(std::span<const float> floats, const std::string& where);

// The "rows" part ([2]) of a whole piece written by blocks: its source shard's row count.
std::vector<float> encode_row_count(std::uint64_t rows);
[[nodiscard]] Result<std::uint64_t> decode_row_count(std::span<const float> floats, const std::string& where);

// The local rows a delta piece holds, in order, from its "blocks" floats and its source shard's
// row count. kInvalidArgument naming `where` when a digit is not one, the blocks are not
// ascending or lie beyond `source_rows`.
[[nodiscard]] Result<std::vector<std::uint64_t>> decode_row_delta_rows(std::span<const float> blocks,
                                                                       std::uint64_t source_rows,
                                                                       const std::string& where);

// Reads entry `entry` of `file` (a delta part: rows.size() rows of `width` floats) in chunks and
// calls put(local_row, row) for each of `rows` in order. kInvalidArgument when the part does not
// hold exactly those rows; the file's read errors.
[[nodiscard]] Result<void> for_each_delta_row(const TensorFileReader& file, std::size_t entry,
                                              std::span<const std::uint64_t> rows, std::uint64_t width,
                                              const std::function<void(std::uint64_t, const float*)>& put);

// The directory of the base a delta in checkpoint `dir` names: dir's sibling ckpt-<base_step>.
std::string row_delta_base_dir(const std::string& dir, std::uint64_t base_step);

// The steps of the bases the pieces of checkpoint `dir`'s psd shard files name (headers and the
// small "base" parts only), ascending, without repeats; empty for a checkpoint of full pieces.
[[nodiscard]] Result<std::vector<std::uint64_t>> row_delta_bases(const std::string& dir);

}  // namespace psrun
