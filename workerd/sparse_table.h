// One sparse embedding table as the worker sees it (`--sparse-embedding NAME`, docs/sparse.md):
// the table [V, D] lives on psd only; a batch's ids of the embedding's input are mapped to local
// rows (its distinct ids in ascending order get rows 0, 1, ...), those rows are pulled into the
// table's local block, and after backward the block's first distinct() gradient rows are pushed
// with their ids. SparseTables (workerd/sparse_tables.h) holds one per table and lays the blocks
// out in the parameter buffer's tail.
//
// Contract: the embedding reads a model input (any of the model's inputs, int ids) directly and
// is that input's only reader, so map_batch() may rewrite the input's ids in place; refusal()
// says why a node cannot be one. Ids are rows of the table (uint32 on the wire); floats are f32.
// A keyed table (make_keyed(), --raw-ids): its ids are raw 64-bit values read from their own
// buffer (map_raw()), with no vocabulary (the model's V is the table's capacity on psd); the
// input's int32 buffer only receives the local rows.
// Memory: capacity(batch) x D floats of the caller's buffer, plus O(lookups) scratch here.
// Not thread-safe; holds no pointer into the model.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "common/ps_client.h"
#include "common/tensor_layout.h"
#include "workerd/nn/model_description.h"

namespace psrun::worker {

class SparseTable {
  public:
    // REQUIRES: refusal(model, node, seed) is empty.
    SparseTable(const nn::ModelDescription& model, const nn::Node& node, std::uint64_t seed);

    // Why `node` (an embedding of `model`) cannot have a sparse table; empty when it can.
    static std::string refusal(const nn::ModelDescription& model, const nn::Node& node, std::uint64_t seed);

    // Validates the batch's ids (`examples` x ids per example; the rest of `ids` is padding, set
    // to row 0), collects the distinct ones and rewrites `ids` to local rows. An id outside
    // [0, V) throws std::out_of_range naming the example, the position and the table.
    void map_batch(std::span<std::int32_t> ids, std::int64_t examples);
    // A keyed table's map_batch(): the raw ids of `examples` examples in `raw` give the distinct
    // keys (ascending) and `local` (the input's buffer, as large as `raw`) gets their local rows.
    void map_raw(std::span<const std::uint64_t> raw, std::span<std::int32_t> local, std::int64_t examples);
    // Makes this a table keyed by raw 64-bit ids with `policy` (see above).
    void make_keyed(const RowPolicy& policy) {
        keyed_ = true;
        policy_ = policy;
    }
    bool keyed() const { return keyed_; }
    const RowPolicy& policy() const { return policy_; }
    // What to pull for the last map_batch(): the distinct ids (valid until the next map_batch()).
    RowRequest request() const {
        return keyed_ ? RowRequest{.tensor = tensor_wire_, .keys = keys_}
                      : RowRequest{.tensor = tensor_wire_, .ids = ids_};
    }
    // Copies the pulled rows (distinct() x width() floats, in request() order) into `block`.
    void install(std::span<const float> pulled, std::span<float> block) const;
    // The gradient rows of the last batch read from the table's gradient block.
    RowGrads row_grads(std::span<const float> grad_block) const;

    // Rows of the local block for batches of `batch` examples (batch x lookups per example, at most V
    // unless keyed, >= 1).
    std::int64_t capacity(std::int64_t batch) const;
    std::size_t distinct() const { return keyed_ ? keys_.size() : ids_.size(); }
    const std::string& name() const { return name_; }  // the table tensor's name, e.g. "emb/table"
    const std::string& node() const { return node_; }  // the embedding node's name
    std::size_t tensor() const { return tensor_; }     // index in model.tensors (and the wire list)
    std::size_t input() const { return input_; }       // index in model.inputs of the ids it reads
    std::int64_t rows() const { return rows_; }
    std::int64_t width() const { return width_; }
    const RowInit& row_init() const { return init_; }
    // Ids looked up by a batch of `batch` examples.
    std::int64_t lookups(std::int64_t batch) const { return batch * per_example_; }

  private:
    std::size_t tensor_ = 0, input_ = 0;
    std::uint32_t tensor_wire_ = 0;
    std::string name_, node_;
    std::int64_t rows_ = 0, width_ = 0, per_example_ = 0;
    RowInit init_;
    std::vector<std::uint32_t> ids_;                              // distinct, ascending
    std::vector<std::pair<std::uint32_t, std::uint32_t>> order_;  // scratch: (id, position)
    bool keyed_ = false;
    RowPolicy policy_;
    std::vector<std::uint64_t> keys_;                                 // keyed: distinct raw ids, ascending
    std::vector<std::pair<std::uint64_t, std::uint32_t>> raw_order_;  // scratch: (raw id, position)
};

}  // namespace psrun::worker
