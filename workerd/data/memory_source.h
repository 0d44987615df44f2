// Batch sources over an in-memory dataset: training batches drawn through the Sampler (a
// worker's shard, reshuffled every epoch from (seed, shard, epoch); seek() is exact), and the
// evaluation pass in index order. Batches are filled on the calling thread (fill_examples: a
// conversion of uint8 to float, ~20 us for an MNIST batch). Not thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "workerd/data/batch_source.h"
#include "workerd/data/labeled_images.h"
#include "workerd/data/sampler.h"

namespace psrun::worker {

class MemorySource final : public BatchSource {
  public:
    // `data` must outlive the source (or be owned: the shared_ptr form). Throws UsageError when
    // the shard is empty (Sampler).
    MemorySource(const LabeledImages& data, std::size_t batch_size, std::uint64_t seed, ShardSpec shard);
    MemorySource(std::shared_ptr<const LabeledImages> data, std::size_t batch_size, std::uint64_t seed,
                 ShardSpec shard);

    void next_batch(BatchView& out) override;
    void seek(std::uint64_t examples) override { sampler_.seek(examples); }
    DataPosition position() const override;
    DataTime data_time() const override { return time_; }  // all handling: nothing to wait for
    const Sampler& sampler() const { return sampler_; }

  private:
    std::shared_ptr<const LabeledImages> owned_;
    const LabeledImages& data_;
    Sampler sampler_;
    std::vector<std::uint32_t> indices_;
    DataTime time_;
};

class MemoryEvalSource final : public EvalSource {
  public:
    explicit MemoryEvalSource(const LabeledImages& data) : data_(data) {}
    explicit MemoryEvalSource(std::shared_ptr<const LabeledImages> data) : owned_(std::move(data)), data_(*owned_) {}

    void rewind() override { next_ = 0; }
    std::size_t next(BatchView& out, std::size_t batch_size) override;
    std::size_t size() const override { return data_.size(); }

  private:
    std::shared_ptr<const LabeledImages> owned_;
    const LabeledImages& data_;
    std::size_t next_ = 0;
    std::vector<std::uint32_t> indices_;
};

}  // namespace psrun::worker
