// Batch sources over a StreamPipeline (workerd/data/stream_pipeline.h): training batches from an
// endless stream of this worker's share, and evaluation passes over a whole test split, both
// decoded on background threads so that the training thread only copies a ready batch.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>

#include "workerd/data/batch_source.h"
#include "workerd/data/stream_pipeline.h"

namespace psrun::worker {

// Makes a pipeline whose stream starts after `start` examples (training; 0 for a pass) with
// batches of `batch_size`.
using PipelineFactory = std::function<std::unique_ptr<StreamPipeline>(std::uint64_t start, std::size_t batch_size)>;

class StreamSource final : public BatchSource {
  public:
    // The pipeline starts at start() or with the first batch (a source that is never drawn
    // from, as the evaluator's, reads nothing). `shard_size`: examples in this worker's share
    // when known (image folders: seek() and position() are exact), 0 for record files (seek
    // restarts the files in a fresh order, see BatchSource).
    StreamSource(PipelineFactory factory, std::size_t batch_size, std::size_t shard_size);
    void next_batch(BatchView& out) override;
    void start() override;
    void seek(std::uint64_t examples) override;
    DataPosition position() const override;
    DataTime data_time() const override { return time_; }
    std::uint64_t skipped_records() const override;

  private:
    PipelineFactory factory_;
    std::size_t batch_size_;
    std::size_t shard_size_;
    std::unique_ptr<StreamPipeline> pipeline_;
    std::uint64_t examples_ = 0;        // drawn since the start (seek sets it)
    std::uint64_t epoch_ = 0;           // of the last batch (record files)
    std::uint64_t skipped_before_ = 0;  // by pipelines replaced by seek()
    DataTime time_;
};

class StreamEvalSource final : public EvalSource {
  public:
    explicit StreamEvalSource(PipelineFactory factory) : factory_(std::move(factory)) {}
    void rewind() override { pipeline_.reset(); }
    std::size_t next(BatchView& out, std::size_t batch_size) override;
    std::size_t size() const override { return 0; }

  private:
    PipelineFactory factory_;
    std::unique_ptr<StreamPipeline> pipeline_;
};

}  // namespace psrun::worker
