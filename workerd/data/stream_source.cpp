#include "workerd/data/stream_source.h"

#include <algorithm>
#include <chrono>

namespace psrun::worker {

StreamSource::StreamSource(PipelineFactory factory, std::size_t batch_size, std::size_t shard_size)
    : factory_(std::move(factory)), batch_size_(batch_size), shard_size_(shard_size) {}

void StreamSource::next_batch(BatchView& out) {
    const auto t0 = std::chrono::steady_clock::now();
    start();
    double blocked = 0;
    auto batch = pipeline_->pop(&blocked);
    if (!batch) throw std::logic_error("a training stream ended");
    batch->copy_to(out);
    epoch_ = batch->epoch;
    examples_ += batch_size_;
    pipeline_->recycle(std::move(batch));
    time_.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), blocked);
}

void StreamSource::start() {
    if (!pipeline_) pipeline_ = factory_(examples_, batch_size_);
}

void StreamSource::seek(std::uint64_t examples) {
    skipped_before_ += pipeline_ ? pipeline_->skipped() : 0;
    pipeline_.reset();     // stops its threads before the new one reads
    examples_ = examples;  // the next batch starts a pipeline there
}

DataPosition StreamSource::position() const {
    if (shard_size_ > 0) return {examples_ / shard_size_, examples_ % shard_size_, examples_, true};
    return {epoch_, 0, examples_, false};
}

std::uint64_t StreamSource::skipped_records() const { return skipped_before_ + (pipeline_ ? pipeline_->skipped() : 0); }

std::size_t StreamEvalSource::next(BatchView& out, std::size_t batch_size) {
    if (!pipeline_) pipeline_ = factory_(0, batch_size);
    auto batch = pipeline_->pop();
    if (!batch) return 0;
    batch->copy_to(out);
    const std::size_t valid = batch->valid;
    pipeline_->recycle(std::move(batch));
    return valid;
}

}  // namespace psrun::worker
