// A BatchSource (workerd/data/batch_source.h) that prepares the next batch on a thread of its own while the step
// computes: it draws from an inner source into a buffer, applies a transform (the training images' augmentation,
// workerd/augment.h) and hands the finished batch over with one copy. So the conversion of pixels, and the flips and
// crops, are off the step's critical path; next_batch() waits only when the thread has not finished the batch yet
// (data_time().waited is that wait).
//
// Batches come in the inner source's order, whatever the timing, and the transform gets each
// batch's index (examples drawn before it / batch size), so a run is reproducible. position()
// is where the consumer stands (the batches handed over), not where the thread read ahead to;
// seek() drops the batch read ahead. The inner source is used only by the thread (and by
// seek() while the thread is idle). An exception the inner source or the transform throws is
// rethrown by the next next_batch(). next_batch(), seek() and the accessors are for one consumer
// thread.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include "workerd/data/batch_source.h"

namespace psrun::worker {

class PrefetchSource final : public BatchSource {
  public:
    // (batch, its index): runs on the prefetch thread, OpenMP limited to that one thread.
    using Transform = std::function<void(BatchView&, std::uint64_t)>;

    // `shape`: spans of the sizes the consumer's views have (their data is not used).
    // `batch_size`: examples per batch (the index of a batch is examples before it / this).
    PrefetchSource(std::unique_ptr<BatchSource> inner, const BatchView& shape, std::size_t batch_size,
                   Transform transform);
    ~PrefetchSource() override;
    PrefetchSource(const PrefetchSource&) = delete;
    PrefetchSource& operator=(const PrefetchSource&) = delete;

    void next_batch(BatchView& out) override;
    void seek(std::uint64_t examples) override;
    DataPosition position() const override;
    DataTime data_time() const override { return time_; }
    std::uint64_t skipped_records() const override;

  private:
    void run();

    std::unique_ptr<BatchSource> inner_;
    const std::size_t batch_size_;
    Transform transform_;
    std::vector<float> f32_;
    std::vector<std::int32_t> i32_, labels_;
    std::vector<float> targets_;

    mutable std::mutex mutex_;
    std::condition_variable cv_;
    bool ready_ = false;    // the buffer holds a finished batch
    bool filling_ = false;  // the thread is drawing one
    bool stop_ = false;
    std::exception_ptr error_;
    DataPosition consumed_;  // after the last batch handed over
    DataPosition after_;     // after the batch in the buffer
    std::uint64_t skipped_ = 0;
    DataTime time_;
    std::thread thread_;  // last: started once the members above exist
};

}  // namespace psrun::worker
