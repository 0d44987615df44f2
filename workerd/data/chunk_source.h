// Training batches from data chunks leased from psd 0 (elastic data, issue 38; psd/data_chunks.h,
// docs/reliability.md "Elastic membership"): instead of a fixed shard i/n, the worker reads the
// examples of one leased chunk at a time, shuffled within the chunk from (seed, epoch, chunk),
// and asks for the next chunk when it has used one up. A chunk used up while filling a batch is
// reported done with the next request after that batch was handed out (so after the step that
// trained on it computed), or by report_finished() before the worker's DONE. In-memory data only.
// Not thread-safe: one training thread calls next_batch() and the fetcher on it.
#pragma once

#include <cstdint>
#include <functional>
#include <stdexcept>
#include <vector>

#include "common/result.h"
#include "common/wire.h"
#include "workerd/data/batch_source.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

// Sends one CHUNK request (PsClient::chunk); errors end training (next_batch throws).
using ChunkFetcher = std::function<Result<wire::ChunkGrant>(const wire::ChunkRequest&)>;

// What next_batch() throws when psd 0 could not be asked: the fetcher's error (a psd lost or
// restarted: the step loop recovers from a restart, workerd/step_loop.h, then calls restart()).
class ChunkFetchError : public std::runtime_error {
  public:
    explicit ChunkFetchError(Error error)
        : std::runtime_error("data chunks: psd 0 did not lease a chunk: " + error.message), error_(std::move(error)) {}
    const Error& error() const { return error_; }

  private:
    Error error_;
};

class ChunkSource final : public BatchSource {
  public:
    // `data` must outlive the source. REQUIRES: 1 <= chunks <= data.size(), batch_size >= 1.
    ChunkSource(const LabeledImages& data, std::size_t batch_size, std::uint64_t seed, std::uint32_t chunks,
                ChunkFetcher fetch);

    // Throws ChunkFetchError when psd 0 cannot be asked (a lost psd, an error reply), and
    // std::runtime_error for a lease outside the data.
    void next_batch(BatchView& out) override;
    // psd 0's dispenser was restored from a checkpoint (after any psd restart the chief restores
    // every shard, psd 0's dispenser with them): the chunk held and the used-up chunks not yet
    // reported are forgotten (the restored dispenser leases every chunk not done at the checkpoint
    // again); the next batch starts with a fresh lease.
    void restart();
    // psd 0 holds where the epoch stands: a resumed worker just leases the next chunk.
    void seek(std::uint64_t examples) override { drawn_ = examples; }
    DataPosition position() const override;
    DataTime data_time() const override { return time_; }
    // Reports the chunks used up and not yet reported (call before DONE). Returns false (and logs)
    // when psd 0 could not be told.
    bool report_finished();
    std::uint64_t chunks_leased() const { return leased_; }

  private:
    void lease_next();  // reports finished_ and leases a chunk into order_
    wire::ChunkRequest request(bool want);

    const LabeledImages& data_;
    std::uint64_t seed_;
    std::uint32_t chunks_;
    ChunkFetcher fetch_;
    std::vector<std::uint32_t> indices_;  // one batch
    std::vector<std::uint32_t> order_;    // the current chunk's examples, shuffled
    std::size_t pos_ = 0;                 // next in order_
    bool holding_ = false;                // order_ is a leased chunk
    wire::ChunkRef current_;
    std::vector<wire::ChunkRef> finished_;  // used up, not yet reported
    std::size_t ready_to_report_ = 0;       // finished_[0..this) were used up by an earlier batch
    std::uint64_t drawn_ = 0, leased_ = 0;
    DataTime time_;
};

}  // namespace psrun::worker
