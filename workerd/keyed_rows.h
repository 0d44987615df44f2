// The rows a checkpoint holds of one table keyed by raw 64-bit ids (--raw-ids; docs/sparse.md "Raw
// ids"), read outside psd for inference (psrun eval, predict and export). Each psd shard's tensor
// file holds the shard's id map "<table>@<s>%<K>/keys" ([rows, 10] floats: id, slot and last update
// as base-2^16 digits, psd/shard_checkpoint_keyed.cpp) beside its slot arrays "<table>@<s>%<K>/param"
// (and "/ema" with --ema-decay), [ceil(capacity / K), width] each. load() gathers every shard's rows
// into one table in ascending id order.
//
// Contract: an id that is a row reads as the values the checkpoint holds; any other id reads as its
// initial values, drawn by id from the table's RowInit (common/row_init.h fill_row), exactly as
// psd's RowStore::gather serves an id that is not a row. Immutable once built; thread-safe to read.
// Memory: rows() x width floats and rows() ids.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/tensor_layout.h"

namespace psrun::worker {

class KeyedRows {
  public:
    KeyedRows() = default;
    // `values`: ids.size() x width floats, row i the values of ids[i]; sorted by id here.
    // Throws std::invalid_argument when the sizes disagree or an id appears twice.
    KeyedRows(std::string table, std::uint32_t width, const RowInit& init, std::vector<std::uint64_t> ids,
              std::vector<float> values);

    // Table `spec` (kind keyed rows, shape [capacity, width], its row_init the table's) of the
    // committed checkpoint directory `dir`, from the shard files its manifest lists: the "param"
    // slots, or with `average` the "ema" ones (the moving average; --ema). Errors, naming the file:
    // kNotFound when no shard file holds the table (or, with `average`, its average);
    // kInvalidArgument when a shard's id map or rows are missing or damaged (a digit that is not
    // an integer in [0, 2^16), a slot beyond the shard's, an id on two shards, NaN/Inf values) or
    // the pieces name two shard counts.
    [[nodiscard]] static Result<KeyedRows> load(const std::string& dir, const TensorSpec& spec, bool average);

    const std::string& table() const { return table_; }
    std::uint32_t width() const { return width_; }
    const RowInit& init() const { return init_; }
    std::size_t rows() const { return ids_.size(); }
    std::span<const std::uint64_t> ids() const { return ids_; }  // ascending
    std::span<const float> values() const { return values_; }    // rows() x width, in ids() order
    // The row of `id` (its index in ids()), or nullopt when the checkpoint holds none.
    std::optional<std::size_t> find(std::uint64_t id) const;
    // Writes the values of each of `keys` (its row, else its initial values) to `out`, keys.size()
    // x width floats; returns how many keys were rows. REQUIRES out.size() >= keys.size() x width
    // (std::invalid_argument otherwise).
    std::size_t gather(std::span<const std::uint64_t> keys, std::span<float> out) const;

  private:
    std::string table_;
    std::uint32_t width_ = 0;
    RowInit init_;
    std::vector<std::uint64_t> ids_;
    std::vector<float> values_;
};

}  // namespace psrun::worker
