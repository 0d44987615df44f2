#include "workerd/prefetch_source.h"

#include <omp.h>

#include <algorithm>
#include <chrono>

namespace psrun::worker {

PrefetchSource::PrefetchSource(std::unique_ptr<BatchSource> inner, const BatchView& shape, std::size_t batch_size,
                               Transform transform)
    : inner_(std::move(inner)),
      batch_size_(std::max<std::size_t>(batch_size, 1)),
      transform_(std::move(transform)),
      f32_(shape.inputs_f32.size()),
      i32_(shape.inputs_i32.size()),
      labels_(shape.labels.size()),
      targets_(shape.targets.size()),
      consumed_(inner_->position()),
      skipped_(inner_->skipped_records()),
      thread_(&PrefetchSource::run, this) {}

PrefetchSource::~PrefetchSource() {
    {
        std::lock_guard<std::mutex> lock(mutex_);
        stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
}

void PrefetchSource::run() {
    omp_set_num_threads(1);  // this thread's parallel regions only: the step keeps its cores
    std::unique_lock<std::mutex> lock(mutex_);
    for (;;) {
        cv_.wait(lock, [&] { return stop_ || (!ready_ && !error_); });
        if (stop_) return;
        filling_ = true;
        const std::uint64_t index = inner_->position().examples / batch_size_;
        lock.unlock();
        std::exception_ptr error;
        DataPosition after;
        std::uint64_t skipped = 0;
        try {
            BatchView view{f32_, i32_, labels_, targets_};
            inner_->next_batch(view);
            if (transform_) transform_(view, index);
            after = inner_->position();
            skipped = inner_->skipped_records();
        } catch (...) {
            error = std::current_exception();
        }
        lock.lock();
        filling_ = false;
        if (error) {
            error_ = error;
        } else {
            ready_ = true;
            after_ = after;
            skipped_ = skipped;
        }
        cv_.notify_all();
    }
}

void PrefetchSource::next_batch(BatchView& out) {
    const auto t0 = std::chrono::steady_clock::now();
    std::unique_lock<std::mutex> lock(mutex_);
    double blocked = 0;
    if (!ready_ && !error_) {
        cv_.wait(lock, [&] { return ready_ || error_; });
        blocked = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (error_) {
        const std::exception_ptr error = error_;
        error_ = nullptr;  // a retry draws again (after a seek, typically)
        cv_.notify_all();
        std::rethrow_exception(error);
    }
    // The thread leaves the buffer alone while ready_ is set.
    std::copy(f32_.begin(), f32_.end(), out.inputs_f32.begin());
    std::copy(i32_.begin(), i32_.end(), out.inputs_i32.begin());
    std::copy(labels_.begin(), labels_.end(), out.labels.begin());
    std::copy(targets_.begin(), targets_.end(), out.targets.begin());
    consumed_ = after_;
    ready_ = false;
    lock.unlock();
    cv_.notify_all();
    time_.add(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), blocked);
}

void PrefetchSource::seek(std::uint64_t examples) {
    std::unique_lock<std::mutex> lock(mutex_);
    cv_.wait(lock, [&] { return !filling_; });
    inner_->seek(examples);
    ready_ = false;
    error_ = nullptr;
    consumed_ = inner_->position();
    lock.unlock();
    cv_.notify_all();
}

DataPosition PrefetchSource::position() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return consumed_;
}

std::uint64_t PrefetchSource::skipped_records() const {
    std::lock_guard<std::mutex> lock(mutex_);
    return skipped_;
}

}  // namespace psrun::worker
