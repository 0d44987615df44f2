#include "workerd/data/stream_pipeline.h"

#include <algorithm>
#include <chrono>
#include <stdexcept>
#include <string>
#include <system_error>

#include "common/option_checks.h"

#include "common/rng.h"
#include "workerd/data/batch_fill.h"

namespace psrun::worker {
namespace {

constexpr std::size_t kChunkRecords = 32;

template <class T>
void copy_span(const std::vector<T>& from, std::span<T> to) {
    if (to.empty() || from.empty()) return;
    std::copy_n(from.begin(), std::min(from.size(), to.size()), to.begin());
}

}  // namespace

void ReadyBatch::copy_to(const BatchView& out) const {
    copy_span(inputs_f32, out.inputs_f32);
    copy_span(inputs_i32, out.inputs_i32);
    copy_span(labels, out.labels);
    copy_span(targets, out.targets);
}

StreamPipeline::StreamPipeline(PipelineConfig config, std::unique_ptr<RecordProducer> producer)
    : config_(std::move(config)), producer_(std::move(producer)) {
    config_.threads = std::clamp(config_.threads, 1, max_threads());  // --data-threads is checked to this too
    config_.prefetch = std::max<std::size_t>(1, config_.prefetch);
    max_in_flight_ = 2 * static_cast<std::size_t>(config_.threads) + 2;
    if (config_.shuffle_buffer > 1) {
        shuffle_ = make_examples(config_.layout, config_.shuffle_buffer);
        shuffle_.normalization = config_.normalization;
    }
    filling_ = new_batch();
    try {
        threads_.emplace_back([this] { run_stage("reader", &StreamPipeline::read_loop); });
        for (int i = 0; i < config_.threads; ++i)
            threads_.emplace_back([this] { run_stage("decoder", &StreamPipeline::decode_loop); });
        threads_.emplace_back([this] { run_stage("assembler", &StreamPipeline::assemble_loop); });
    } catch (const std::system_error& e) {
        // The host refused a thread: stop the ones started (a joinable std::thread destroyed
        // during unwinding would call std::terminate) and say what to change.
        const std::size_t started = threads_.size();
        stop_threads();
        throw std::runtime_error("data pipeline: the host refused thread " + std::to_string(started + 1) + " of " +
                                 std::to_string(config_.threads + 2) + " (" + std::to_string(config_.threads) +
                                 " decoding threads): " + e.what() + "; give fewer --data-threads");
    }
}

void StreamPipeline::run_stage(const char* stage, void (StreamPipeline::*loop)()) {
    try {
        (this->*loop)();
    } catch (const std::exception& e) {
        fail(Error{ErrorCode::kIo, std::string("data pipeline: the ") + stage + " thread failed: " + e.what()});
    } catch (...) {
        fail(Error{ErrorCode::kIo, std::string("data pipeline: the ") + stage + " thread failed"});
    }
}

StreamPipeline::~StreamPipeline() { stop_threads(); }

void StreamPipeline::stop_threads() {
    {
        std::lock_guard lock(m_);
        stop_ = true;
    }
    cv_room_.notify_all();
    cv_decode_.notify_all();
    cv_done_.notify_all();
    cv_ready_.notify_all();
    for (auto& t : threads_) t.join();
    threads_.clear();
}

std::unique_ptr<ReadyBatch> StreamPipeline::new_batch() {
    auto b = std::make_unique<ReadyBatch>();
    const ModelInput& m = config_.layout.model;
    const std::size_t n = config_.batch_size;
    if (m.input == InputKind::kTokens) b->inputs_i32.resize(n * static_cast<std::size_t>(m.length));
    else b->inputs_f32.resize(n * static_cast<std::size_t>(m.input_size()));
    if (m.target == TargetKind::kClass) b->labels.resize(n);
    else b->targets.resize(n * static_cast<std::size_t>(m.target_length));
    return b;
}

void StreamPipeline::fail(Error e) {
    {
        std::lock_guard lock(m_);
        if (!error_) error_ = std::move(e);
        stop_ = true;
    }
    cv_room_.notify_all();
    cv_decode_.notify_all();
    cv_done_.notify_all();
    cv_ready_.notify_all();
}

void StreamPipeline::read_loop() {
    std::uint64_t seq = 0;
    std::optional<RawRecord> carry;  // the first record of the next epoch, read at the end of a chunk
    while (true) {
        std::unique_ptr<Chunk> c;
        {
            std::lock_guard lock(m_);
            if (stop_) return;
            if (!spare_chunks_.empty()) {
                c = std::move(spare_chunks_.back());
                spare_chunks_.pop_back();
            }
        }
        if (!c) c = std::make_unique<Chunk>();
        c->seq = seq++;
        c->records = 0;
        c->error.reset();
        c->last = false;
        if (carry) {
            if (c->raw.empty()) c->raw.emplace_back();
            std::swap(c->raw[0], *carry);
            carry.reset();
            c->records = 1;
        }
        while (c->records < kChunkRecords) {
            if (c->raw.size() <= c->records) c->raw.emplace_back();
            auto more = producer_->next(c->raw[c->records]);
            if (!more) {
                c->error = more.error();
                c->last = true;
                break;
            }
            if (!*more) {
                c->last = true;
                break;
            }
            // A chunk holds one epoch's records: the shuffle buffer drains at epoch boundaries.
            if (c->records > 0 && c->raw[c->records].epoch != c->raw[0].epoch) {
                carry = std::move(c->raw[c->records]);
                break;
            }
            ++c->records;
        }
        const bool last = c->last;
        {
            std::unique_lock lock(m_);
            cv_room_.wait(lock, [&] { return in_flight_ < max_in_flight_ || stop_; });
            if (stop_) return;
            producer_skipped_ = producer_->skipped();
            to_decode_.push_back(std::move(c));
            ++in_flight_;
        }
        cv_decode_.notify_one();
        if (last) return;
    }
}

void StreamPipeline::decode_chunk(Chunk& c, ExampleDecoder& decoder) {
    if (c.decoded.size() < kChunkRecords) {
        c.decoded = make_examples(config_.layout, kChunkRecords);
        c.decoded.normalization = config_.normalization;
    }
    c.count = 0;
    c.skipped = 0;
    for (std::size_t i = 0; i < c.records; ++i) {
        const RawRecord& r = c.raw[i];
        const std::string what = producer_->describe(r);
        auto ok = producer_->examples() ? decoder.decode_example(r.bytes, c.decoded, c.count, what)
                                        : decoder.decode_image(r.bytes, r.label, c.decoded, c.count, what);
        if (ok) {
            ++c.count;
            continue;
        }
        if (config_.corrupt == CorruptRecords::kSkip) {
            ++c.skipped;
            continue;
        }
        c.error = ok.error();  // replaces a reader error that came after this record
        c.last = true;
        return;
    }
}

void StreamPipeline::decode_loop() {
    ExampleDecoder decoder(config_.layout, config_.keys, config_.resize);
    while (true) {
        std::unique_ptr<Chunk> c;
        {
            std::unique_lock lock(m_);
            cv_decode_.wait(lock, [&] { return !to_decode_.empty() || stop_; });
            if (stop_) return;
            c = std::move(to_decode_.front());
            to_decode_.pop_front();
        }
        decode_chunk(*c, decoder);
        {
            std::lock_guard lock(m_);
            const std::uint64_t seq = c->seq;
            decoded_[seq] = std::move(c);
        }
        cv_done_.notify_all();
    }
}

bool StreamPipeline::push_batch() {
    ReadyBatch& b = *filling_;
    b.valid = slot_;
    // A partial last batch: the other slots repeat the first example (not counted).
    for (std::size_t s = slot_; s < config_.batch_size; ++s) {
        auto repeat = [&](auto& v) {
            if (v.empty()) return;
            const std::size_t n = v.size() / config_.batch_size;
            std::copy_n(v.begin(), n, v.begin() + static_cast<std::ptrdiff_t>(s * n));
        };
        repeat(b.inputs_f32);
        repeat(b.inputs_i32);
        repeat(b.labels);
        repeat(b.targets);
    }
    {
        std::unique_lock lock(m_);
        cv_ready_.wait(lock, [&] { return ready_.size() < config_.prefetch || stop_; });
        if (stop_) return false;
        ready_.push_back(std::move(filling_));
        if (!spare_batches_.empty()) {
            filling_ = std::move(spare_batches_.back());
            spare_batches_.pop_back();
        }
    }
    cv_ready_.notify_all();
    if (!filling_) filling_ = new_batch();
    slot_ = 0;
    return true;
}

bool StreamPipeline::emit(const LabeledImages& store, std::size_t index, std::uint64_t epoch) {
    ReadyBatch& b = *filling_;
    const std::size_t n = config_.batch_size;
    auto slot_of = [&](auto& v) {
        using T = typename std::decay_t<decltype(v)>::value_type;
        if (v.empty()) return std::span<T>();
        const std::size_t per = v.size() / n;
        return std::span<T>(v).subspan(slot_ * per, per);
    };
    const BatchView view{slot_of(b.inputs_f32), slot_of(b.inputs_i32), slot_of(b.labels), slot_of(b.targets)};
    const auto i = static_cast<std::uint32_t>(index);
    fill_examples(store, {&i, 1}, view);
    b.epoch = epoch;
    return ++slot_ < n || push_batch();
}

void StreamPipeline::assemble_loop() {
    Rng rng(config_.shuffle_seed, 0x5348554646ull);
    const std::size_t capacity = config_.shuffle_buffer;
    std::uint64_t next_seq = 0;
    std::uint64_t buffer_epoch = 0;
    // Empties the shuffle buffer in random order (at the end of an epoch or of the stream).
    const auto drain = [&](std::uint64_t epoch) {
        while (shuffle_size_ > 0) {
            const std::size_t j = rng.below(shuffle_size_);
            if (!emit(shuffle_, j, epoch)) return false;
            if (j != shuffle_size_ - 1) copy_example(shuffle_, shuffle_size_ - 1, shuffle_, j);
            --shuffle_size_;
        }
        return true;
    };
    while (true) {
        std::unique_ptr<Chunk> c;
        {
            std::unique_lock lock(m_);
            cv_done_.wait(lock, [&] { return decoded_.count(next_seq) > 0 || stop_; });
            if (stop_) return;
            auto it = decoded_.find(next_seq);
            c = std::move(it->second);
            decoded_.erase(it);
            --in_flight_;
            skipped_ += c->skipped;
        }
        cv_room_.notify_one();
        ++next_seq;
        const std::uint64_t epoch = c->records ? c->raw[0].epoch : buffer_epoch;
        if (epoch != buffer_epoch) {  // tf.data's shuffle().repeat(): epochs do not mix
            if (!drain(buffer_epoch)) return;
            buffer_epoch = epoch;
        }
        for (std::size_t i = 0; i < c->count; ++i) {
            if (capacity <= 1) {
                if (!emit(c->decoded, i, epoch)) return;
            } else if (shuffle_size_ < capacity) {
                copy_example(c->decoded, i, shuffle_, shuffle_size_++);
            } else {
                const std::size_t j = rng.below(capacity);
                if (!emit(shuffle_, j, epoch)) return;
                copy_example(c->decoded, i, shuffle_, j);
            }
        }
        std::optional<Error> error = std::move(c->error);
        const bool last = c->last;
        {
            std::lock_guard lock(m_);
            spare_chunks_.push_back(std::move(c));
        }
        if (error) return fail(std::move(*error));  // the partial batch and the buffer are dropped
        if (!last) continue;
        if (!drain(epoch)) return;
        if (slot_ > 0 && !push_batch()) return;
        {
            std::lock_guard lock(m_);
            finished_ = true;
        }
        cv_ready_.notify_all();
        return;
    }
}

std::unique_ptr<ReadyBatch> StreamPipeline::pop(double* waited) {
    std::unique_lock lock(m_);
    const auto available = [&] { return !ready_.empty() || finished_ || error_; };
    if (waited) *waited = 0;
    if (!available()) {
        const auto t0 = std::chrono::steady_clock::now();
        cv_ready_.wait(lock, available);
        if (waited) *waited = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    }
    if (!ready_.empty()) {
        auto b = std::move(ready_.front());
        ready_.pop_front();
        lock.unlock();
        cv_ready_.notify_all();
        return b;
    }
    if (error_) throw UsageError(error_->message);
    return nullptr;
}

void StreamPipeline::recycle(std::unique_ptr<ReadyBatch> batch) {
    if (!batch) return;
    std::lock_guard lock(m_);
    spare_batches_.push_back(std::move(batch));
}

std::uint64_t StreamPipeline::skipped() const {
    std::lock_guard lock(m_);
    return skipped_ + producer_skipped_;
}

}  // namespace psrun::worker
