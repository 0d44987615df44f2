#include "workerd/data/memory_source.h"

#include <algorithm>
#include <chrono>

#include "workerd/data/batch_fill.h"

namespace psrun::worker {

MemorySource::MemorySource(const LabeledImages& data, std::size_t batch_size, std::uint64_t seed, ShardSpec shard)
    : data_(data), sampler_(data.size(), seed, shard), indices_(batch_size) {}

MemorySource::MemorySource(std::shared_ptr<const LabeledImages> data, std::size_t batch_size, std::uint64_t seed,
                           ShardSpec shard)
    : owned_(std::move(data)), data_(*owned_), sampler_(data_.size(), seed, shard), indices_(batch_size) {}

void MemorySource::next_batch(BatchView& out) {
    const auto t0 = std::chrono::steady_clock::now();
    sampler_.next_batch(indices_);
    fill_examples(data_, indices_, out);
    time_.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 0);
}

DataPosition MemorySource::position() const { return {sampler_.epoch(), sampler_.offset(), sampler_.position(), true}; }

std::size_t MemoryEvalSource::next(BatchView& out, std::size_t batch_size) {
    if (next_ >= data_.size()) return 0;
    const std::size_t valid = std::min(batch_size, data_.size() - next_);
    indices_.resize(batch_size);
    // The last partial batch repeats example 0 in the unused slots; they are not counted.
    for (std::size_t i = 0; i < batch_size; ++i) indices_[i] = static_cast<std::uint32_t>(i < valid ? next_ + i : 0);
    fill_examples(data_, indices_, out);
    next_ += valid;
    return valid;
}

}  // namespace psrun::worker
