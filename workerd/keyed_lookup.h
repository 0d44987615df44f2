// Inference over tables keyed by raw 64-bit ids (psrun eval and predict of a checkpoint trained
// with --raw-ids; docs/sparse.md "Raw ids"), the way training runs them: the network is built from
// SparseTables' local model (workerd/sparse_tables.h), in which each keyed table is a block of as
// many rows as a batch has lookups, after the dense tensors; each batch's raw ids (raw_ids(),
// filled by the data) are mapped to local rows by SparseTable::map_raw, and the block receives
// each distinct id's values from the checkpoint's rows (KeyedRows::gather: the row's values, or
// the id's initial values when it is not a row, as psd serves it) instead of a pull from psd.
//
// Contract: `model` is the full model (each keyed table [capacity, D]); `names` are the --raw-ids
// values (embedding node or table names) and each names one of `tables` (by table name); every
// keyed table the checkpoint holds is named. Throws UsageError naming the value otherwise, or when
// an embedding cannot be a keyed table (SparseTable::refusal). Holds pointers to `model` and
// `tables`, which must outlive it. Not thread-safe.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "workerd/keyed_rows.h"
#include "workerd/nn/model_description.h"
#include "workerd/sparse_tables.h"

namespace psrun::worker {

class KeyedLookup {
  public:
    KeyedLookup(const nn::ModelDescription& model, const std::vector<std::string>& names,
                std::span<const KeyedRows> tables);

    // The model a network evaluates batches of `batch` examples with: the dense tensors first, in
    // the model's order (the layout of the checkpoint's dense values), then one block per table.
    nn::ModelDescription local_model(std::int64_t batch) const { return sparse_.local_model(batch); }
    // Floats of the blocks after the dense tensors for batches of `batch`.
    std::size_t tail_floats(std::int64_t batch) const { return sparse_.tail_floats(batch); }
    // The raw-id buffer of the keyed table reading model input `input` (empty when none does), for
    // batches of `batch` examples: the data fills it (ColumnSpan::u64).
    std::span<std::uint64_t> raw_ids(std::size_t input, std::int64_t batch) { return sparse_.raw_ids(input, batch); }
    // Maps the batch (`examples` valid of `batch`): `ids_of(i)` is model input i's id buffer of the
    // network, which receives the local rows; `params` is the network's parameter buffer
    // (local_model(batch).parameter_count floats), whose blocks receive the rows.
    void map_batch(const std::function<std::span<std::int32_t>(std::size_t input)>& ids_of, std::int64_t examples,
                   std::int64_t batch, std::span<float> params);

    // Distinct ids per batch, summed over the batches mapped so far and all tables, and how many
    // of them were rows of the checkpoint (the others read as their initial values).
    std::uint64_t distinct_ids() const { return distinct_; }
    std::uint64_t found_ids() const { return found_; }

  private:
    SparseTables sparse_;
    std::vector<const KeyedRows*> rows_;  // per table of sparse_.tables()
    std::int64_t offsets_batch_ = -1;     // the batch offsets_ were computed for
    std::vector<std::size_t> offsets_;    // each table's block in the local model's buffer
    std::uint64_t distinct_ = 0, found_ = 0;
};

}  // namespace psrun::worker
