// The worker's side of a sparse embedding table (`--sparse-embedding NAME`, docs/protocol.md
// "Sparse tables"): the table [V, D] lives on psd only, row r on shard r mod K; per step the
// worker pulls the rows of its batch's distinct ids, trains on them, and pushes their gradients.
//
// How the engine sees it: the network is built from a local model (local_model()) in which the
// table has `capacity` rows (the most distinct ids one batch can hold: batch x ids per example,
// at most V) and sits after the dense tensors, in the parameter buffer's local tail
// (ParameterSet::tail()). map_batch() rewrites the batch's ids in place to local rows (the
// distinct ids in ascending order get rows 0, 1, ...), install() copies the pulled rows there,
// and after backward row_grads() hands out the local gradient rows [0, distinct) with their ids.
// The dense tensors keep their order and the wire's flat layout; the table is a rows tensor in
// the wire list (wire_tensors()), at its place in the model's order.
//
// Limits (UsageError at create, naming them): one sparse table per model; its embedding reads
// the model's input ids directly and no other node reads them; the table is read by no other
// node; its initializer is one row_init can draw (nn::table_row_init); not with a model that
// brings initial values (an ONNX file: use --init description).
// Memory: O(dense + capacity x D) on the worker, whatever V is. Not thread-safe.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/ps_client.h"
#include "common/tensor_layout.h"
#include "workerd/nn/model_description.h"
#include "workerd/parameter_set.h"

namespace psrun::worker {

// Distributed mode, no --sparse-embedding: an embedding table of at least this many floats
// (256 MiB as f32: 4M rows of 16) is made sparse anyway, since copying it whole to every worker at
// every step is never what a user wants.
inline constexpr std::int64_t kAutoSparseFloats = std::int64_t{1} << 26;

class SparseTables {
public:
    SparseTables() = default;  // none: every tensor dense
    // `names`: node or tensor names ("emb" or "emb/table"); empty: none. Throws UsageError.
    SparseTables(const nn::ModelDescription& model, const std::vector<std::string>& names, std::uint64_t seed);

    // Why `node` (an embedding of `model`) cannot have a sparse table; empty when it can.
    static std::string refusal(const nn::ModelDescription& model, const nn::Node& node, std::uint64_t seed);
    // The largest embedding whose table has at least `min_floats` and can be sparse, if any
    // (workerd makes it sparse without the option: kAutoSparseFloats).
    static std::optional<std::string> automatic(const nn::ModelDescription& model, std::int64_t min_floats,
                                                std::uint64_t seed);

    bool empty() const { return !table_; }
    // The dense tensors in the wire's flat layout (the table left out, offsets compacted).
    const std::vector<TensorInfo>& dense_tensors() const { return dense_; }
    // Every tensor as psd sees it: the table a rows tensor [V, D] with its row initializer.
    std::vector<TensorSpec> wire_tensors() const;
    // Rows in the local table for batches of `batch` examples.
    std::int64_t capacity(std::int64_t batch) const;
    // Floats of the local tail for batches up to `batch` examples.
    std::size_t tail_floats(std::int64_t batch) const;
    // The model the network trains for batches of `batch` examples (see above).
    nn::ModelDescription local_model(std::int64_t batch) const;

    // Validates the batch's ids (`examples` x ids per example), collects the distinct ones and
    // rewrites `ids` to local rows. An id outside [0, V) throws std::out_of_range naming the
    // example and the table.
    void map_batch(std::span<std::int32_t> ids, std::int64_t examples);
    // The distinct ids of the last map_batch(), to pull.
    std::span<const RowRequest> requests() const { return {&request_, 1}; }
    // Copies the pulled rows (PulledRows of requests()) into the local table at the start of `tail`.
    void install(const PulledRows& rows, std::span<float> tail) const;
    // The gradient rows of the last batch, read from the gradient buffer's tail.
    std::span<const RowGrads> row_grads(std::span<const float> grad_tail);
    // Distinct ids of the last batch.
    std::size_t distinct() const { return ids_.size(); }
    const std::string& table_name() const { return name_; }
    std::int64_t rows() const { return rows_; }
    std::int64_t width() const { return width_; }
    // Ids looked up by a batch of `batch` examples.
    std::int64_t lookups(std::int64_t batch) const { return batch * per_example_; }

private:
    const nn::ModelDescription* model_ = nullptr;  // not owned: outlives this (the trainer's config)
    bool table_ = false;
    std::size_t tensor_ = 0;  // the table's index in model.tensors (and in the wire list)
    std::string name_, node_;
    std::int64_t rows_ = 0, width_ = 0, per_example_ = 0;
    RowInit init_;
    std::vector<TensorInfo> dense_;
    std::vector<std::uint32_t> ids_;                           // distinct, ascending
    std::vector<std::pair<std::uint32_t, std::uint32_t>> order_;  // scratch: (id, position)
    RowRequest request_;
    RowGrads grads_;
};

}  // namespace psrun::worker
