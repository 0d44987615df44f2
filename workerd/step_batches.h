// The K micro-batches of one update with sparse tables (Trainer, --accumulate-steps K with
// --sparse-embedding; docs/sparse.md "Gradient accumulation"). All K are drawn before the first
// forward so that each table's ids of the whole update are mapped to local rows together
// (SparseTables::map_batch over K x batch examples: the local table holds their union) and pulled
// in one exchange; every micro-batch then trains on the same rows, as the dense path's
// micro-batches share the same parameters, and the table's gradient block accumulates like the
// dense gradient.
//
// Holds a copy of every buffer a network's step reads (each model input's floats or ids, labels,
// targets), micro-batch after micro-batch, so the K copies of one id input are one span (ids()).
// Memory: K x the network's batch buffers. Not thread-safe. Holds no pointer into the network:
// save() and restore() take it each time.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "workerd/nn/network.h"

namespace psrun::worker {

class StepBatches {
  public:
    // Room for `count` (>= 1) micro-batches of `network`'s buffers.
    StepBatches(nn::Network& network, int count);

    int count() const { return count_; }
    // Copies `network`'s buffers (holding micro-batch k, 0 <= k < count()) in.
    void save(nn::Network& network, int k);
    // Copies micro-batch k back into `network`'s buffers (overwriting the batch they hold).
    void restore(nn::Network& network, int k) const;
    // Model input `input`'s ids of all micro-batches, micro-batch 0 first (empty when the input
    // is not ids). Rewriting them rewrites what restore() copies back.
    std::span<std::int32_t> ids(std::size_t input);

  private:
    int count_ = 1;
    // Per buffer of the network (the inputs' f32 and i32 spans, labels, targets), K copies.
    std::vector<std::vector<float>> f32_;
    std::vector<std::vector<std::int32_t>> i32_;
};

}  // namespace psrun::worker
