// The worker's sparse embedding tables (`--sparse-embedding NAME`, repeatable; docs/sparse.md,
// docs/protocol.md "Sparse tables"): each table [V, D] lives on psd only, row r on shard r mod K;
// per step the worker pulls, for every table, the rows of its batch's distinct ids, trains on
// them, and pushes their gradients, all tables in the step's one PULL and one PUSH_PULL.
//
// How the engine sees it: the network is built from a local model (local_model()) in which each
// table has `capacity` rows (the most distinct ids one batch can hold: batch x ids per example,
// at most V). The tables sit after the dense tensors, in the parameter buffer's local tail
// (ParameterSet::tail()), one block each in the model's tensor order; a block's offset depends
// on the batch the network was built for. map_batch() rewrites each table's input ids in place
// to local rows (SparseTable, workerd/sparse_table.h), install() copies the pulled rows into the
// blocks, and after backward row_grads() hands out each block's gradient rows with their ids.
// The dense tensors keep their order and the wire's flat layout; each table is a rows tensor in
// the wire list (wire_tensors()), at its place in the model's order.
//
// Limits (UsageError at create, naming the option's value): each embedding reads one of the
// model's inputs directly and no other node reads that input; its table is read by no other
// node; its initializer is one row_init can draw (nn::table_row_init); not with a model that
// brings initial values (an ONNX file: use --init description); a table named twice is refused.
// Memory: O(dense + sum of capacity x D) on the worker, whatever V is. Not thread-safe. Holds a
// pointer to the model, which must outlive it.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <vector>

#include "common/ps_client.h"
#include "common/tensor_layout.h"
#include "workerd/nn/model_description.h"
#include "workerd/parameter_set.h"
#include "workerd/sparse_table.h"

namespace psrun::worker {

// Distributed mode, no --sparse-embedding: every embedding table of at least this many floats
// (256 MiB as f32: 4M rows of 16) is made sparse anyway, since copying it whole to every worker at
// every step is never what a user wants.
inline constexpr std::int64_t kAutoSparseFloats = std::int64_t{1} << 26;

// Tables keyed by raw 64-bit ids (--raw-ids, docs/sparse.md "Raw ids"): the named embeddings
// (node or table names; sparse tables then, named by --sparse-embedding or not) read raw ids from
// an extra model input (ColumnSpan::u64), and psd admits and evicts their rows by `policy`.
struct RawIdTables {
    std::vector<std::string> names;
    RowPolicy policy;
};

class SparseTables {
  public:
    SparseTables() = default;  // none: every tensor dense
    // `names`: node or tensor names ("emb" or "emb/table"), one table each; empty: none.
    // Throws UsageError naming the value.
    SparseTables(const nn::ModelDescription& model, const std::vector<std::string>& names, std::uint64_t seed,
                 const RawIdTables& raw = {});
    // The model inputs the embeddings `names` read (for the data loaders); UsageError naming an
    // unknown name and the model's embeddings.
    static std::vector<std::string> raw_inputs(const nn::ModelDescription& model,
                                               const std::vector<std::string>& names);

    // The embeddings whose tables have at least `min_floats` and can be sparse, in the model's
    // order (workerd makes them sparse without the option: kAutoSparseFloats).
    static std::vector<std::string> automatic(const nn::ModelDescription& model, std::int64_t min_floats,
                                              std::uint64_t seed);

    bool empty() const { return tables_.empty(); }
    // In the model's tensor order.
    const std::vector<SparseTable>& tables() const { return tables_; }
    // Whether model.tensors[tensor] is one of the tables.
    bool is_sparse(std::size_t tensor) const;
    // "a/table, b/table": for messages.
    std::string names() const;
    // The dense tensors in the wire's flat layout (the tables left out, offsets compacted).
    const std::vector<TensorInfo>& dense_tensors() const { return dense_; }
    // Every tensor as psd sees it: each table a rows tensor [V, D] with its row initializer.
    std::vector<TensorSpec> wire_tensors() const;
    // Floats of the local tail for batches of `batch` examples (every table's block).
    std::size_t tail_floats(std::int64_t batch) const;
    // The model a network trains or evaluates with for batches of `batch` examples (see above).
    nn::ModelDescription local_model(std::int64_t batch) const;

    // Maps every table's ids: `ids_of(i)` is model input i's id buffer of a network built from
    // local_model(`batch`), holding `examples` valid examples. An id outside its table throws
    // std::out_of_range naming the table. A keyed table's ids are its raw buffer's
    // (raw_ids(input, batch), filled by the data), its input buffer receives the local rows.
    void map_batch(const std::function<std::span<std::int32_t>(std::size_t input)>& ids_of, std::int64_t examples,
                   std::int64_t batch);
    // The raw-id buffer of the keyed table reading model input `input`, for batches of `batch`
    // examples (empty when no keyed table reads it). Valid until the next call with a larger batch.
    std::span<std::uint64_t> raw_ids(std::size_t input, std::int64_t batch);
    bool keyed() const;  // any table is keyed by raw ids
    // --accumulate-steps: micro-batch k of `count` (each of `batch` examples) was loaded into the
    // raw-id buffers; keeps its raw ids at position k of the update's. After the last one (k =
    // count - 1) each buffer holds the `count` micro-batches' raw ids in order, for a map_batch()
    // over count x batch examples, as StepBatches::ids() does for the row ids.
    void keep_raw(int k, int count, std::int64_t batch);
    // The distinct ids of the last map_batch(), one request per table, to pull in one exchange.
    std::span<const RowRequest> requests() const { return requests_; }
    // Copies the pulled rows (PulledRows of requests()) into the blocks of `tail`.
    void install(const PulledRows& rows, std::span<float> tail) const;
    // The gradient rows of the last batch, one entry per table, read from the gradient buffer's tail.
    std::span<const RowGrads> row_grads(std::span<const float> grad_tail);
    // The same rows, writable (clipping scales them).
    std::vector<std::span<float>> grad_rows(std::span<float> grad_tail) const;
    // Distinct ids of the last batch, all tables.
    std::size_t distinct() const;

  private:
    const nn::ModelDescription* model_ = nullptr;  // not owned: outlives this (the trainer's config)
    std::vector<SparseTable> tables_;
    std::vector<TensorInfo> dense_;
    std::vector<std::size_t> offsets_;  // each table's block in the tail, for the last map_batch()'s batch
    std::vector<RowRequest> requests_;
    std::vector<RowGrads> grads_;
    std::vector<std::vector<std::uint64_t>> raw_;       // per table: a keyed table's raw ids of the batch
    std::vector<std::vector<std::uint64_t>> step_raw_;  // per table: keep_raw()'s micro-batches
    std::vector<std::size_t> block_offsets(std::int64_t batch) const;
};

}  // namespace psrun::worker
