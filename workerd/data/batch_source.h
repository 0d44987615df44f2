// The interface between data and the training runtime: the Trainer asks a BatchSource for the
// next training batch, the evaluation walks an EvalSource once in order. Two implementations:
// in-memory data drawn through the Sampler (workerd/data/memory_source.h) and a stream decoded
// on background threads (workerd/data/stream_source.h).
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace psrun::worker {

// Where a batch goes: the model's buffers, batch_size examples each. A span the model does not
// have is empty; a source fills the spans its data has (REQUIRES: they are batch_size x the
// model's per-example size, which check_fits_model made the data's).
// One extra model input's buffer (a model with several inputs): floats or ids, the other empty.
struct ColumnSpan {
    std::span<float> f32;
    std::span<std::int32_t> i32;
    std::span<std::uint64_t> u64 = {};  // raw ids of a table keyed by them (--raw-ids), in place of i32
};

struct BatchView {
    std::span<float> inputs_f32;         // images (NCHW) or feature vectors
    std::span<std::int32_t> inputs_i32;  // token ids
    std::span<std::int32_t> labels;      // class labels
    std::span<float> targets;            // target vectors
    // The model's inputs after the first, in order (LabeledImages::columns fill them); empty
    // for a single-input model.
    std::vector<ColumnSpan> columns{};
    // Raw ids of the primary input when a table keyed by them reads it (--raw-ids): the data fills
    // this in place of inputs_i32 (which receives the mapped rows).
    std::span<std::uint64_t> inputs_u64 = {};
};

// Where a training stream stands, for logs and preemption checkpoints.
struct DataPosition {
    std::uint64_t epoch = 0;     // of this worker's share
    std::uint64_t offset = 0;    // examples into that epoch
    std::uint64_t examples = 0;  // drawn since the start
    bool exact = true;           // false: a streamed source restarts its files on seek (see seek())
};

// Where a source's next_batch() calls spent their time, in seconds summed over the calls.
struct DataTime {
    double waited = 0;        // blocked because no batch was ready yet (a stream's or a prefetch
                              // thread's queue empty): the step waiting for its data
    double longest_wait = 0;  // the longest single such wait
    double handling = 0;      // the rest: copying a ready batch into the model's input, or
                              // gathering it from memory on the training thread (any time the
                              // thread lost its CPU to others meanwhile included)
    // One call of `total` seconds, `blocked` of them waiting.
    void add(double total, double blocked) {
        waited += blocked;
        longest_wait = blocked > longest_wait ? blocked : longest_wait;
        handling += total > blocked ? total - blocked : 0.0;
    }
    double total() const { return waited + handling; }
};

// A worker's training data: an endless sequence of batches over its share, reshuffled every
// epoch. Not thread-safe (one training thread calls it).
class BatchSource {
  public:
    virtual ~BatchSource() = default;
    // Fills `out` with the next batch. Throws UsageError (exit 2) on data that turns out bad
    // while streaming (a corrupt record, an image that does not decode), naming the file and
    // record.
    virtual void next_batch(BatchView& out) = 0;
    // Starts reading ahead now rather than at the first next_batch() (a stream begins filling
    // its shuffle buffer while the caller builds the network and joins the job); no-op for
    // in-memory data. Optional; a later seek() discards what was read ahead.
    virtual void start() {}
    // Puts the source where it would be after `examples` examples drawn since the start. In
    // memory: exactly there (Sampler::seek). Streamed from record files: the stream restarts
    // from a fresh shuffle of its files keyed by `examples` (position() reports exact = false):
    // the examples of the interrupted epoch may be seen again, as when a tf.data pipeline
    // restarts without a saved iterator.
    virtual void seek(std::uint64_t examples) = 0;
    virtual DataPosition position() const = 0;
    // Time spent in next_batch(): waiting for a batch, and handling it (see DataTime).
    virtual DataTime data_time() const = 0;
    // Records skipped as corrupt (--corrupt-records skip); 0 otherwise.
    virtual std::uint64_t skipped_records() const { return 0; }
};

// A test split walked once, in order, for evaluation. Not thread-safe.
class EvalSource {
  public:
    virtual ~EvalSource() = default;
    // Starts a pass from the first example.
    virtual void rewind() = 0;
    // Fills `out` with the next up to batch_size examples; returns how many are real (the rest
    // of the batch holds copies of other examples, not to be counted). 0: the pass is over.
    virtual std::size_t next(BatchView& out, std::size_t batch_size) = 0;
    // Examples in a pass, when known before the first pass (in memory); 0 for a stream.
    virtual std::size_t size() const = 0;
};

}  // namespace psrun::worker
