// A stream of batches decoded off the training thread, as tf.data's
// interleave -> map(num_parallel_calls) -> shuffle(buffer) -> batch -> prefetch:
//   reader thread    RecordProducer: raw records, grouped into chunks of 32 (file I/O, framing, CRC)
//   decode threads   ExampleDecoder: each chunk decoded into examples (JPEG/PNG, protobuf)
//   assembler thread chunks taken back in order; examples through a shuffle buffer of
//                    `shuffle_buffer` examples (tf.data's: full, then each output a random
//                    element replaced by the next input; emptied at the end of each epoch, as
//                    shuffle().repeat(), so that an epoch holds every record once); batches
//                    converted to float (uint8 / 255, --normalize) and queued, `prefetch` of them
//   consumer         pop(): the training (or evaluation) thread takes a ready batch
// Memory is bounded by the shuffle buffer, 2 x threads + 2 chunks in flight and the prefetched
// batches, whatever the size of the data. Decoding is parallel but results are used in record
// order, so a seed gives the same batches on every run. Errors (a corrupt record under
// --corrupt-records error, an image that does not decode) surface in pop() at the record's
// place in the stream; an exception on one of the threads surfaces in pop() too. Thread-safe:
// pop() from one thread at a time; the destructor stops and joins the threads.
#pragma once

#include <condition_variable>
#include <cstdint>
#include <deque>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

#include "common/result.h"
#include "workerd/data/batch_source.h"
#include "workerd/data/example_decoder.h"
#include "workerd/data/record_producer.h"

namespace psrun::worker {

struct PipelineConfig {
    ExampleLayout layout;
    RecordKeys keys;
    ResizeMode resize = ResizeMode::kCrop;
    Normalization normalization;
    CorruptRecords corrupt = CorruptRecords::kError;  // also for records that do not decode
    std::size_t batch_size = 50;
    std::size_t shuffle_buffer = 10000;  // examples; <= 1: in record order
    std::size_t prefetch = 4;            // ready batches
    int threads = 1;                     // decode threads (clamped to 1..max_threads(), common/option_checks.h)
    std::uint64_t shuffle_seed = 1;
};

// A batch as the pipeline hands it over: the float, int and label/target arrays of
// batch_size examples, `valid` of them real (the last batch of a pass may be partial; its other
// slots repeat the batch's first example).
struct ReadyBatch {
    std::vector<float> inputs_f32;
    std::vector<std::int32_t> inputs_i32;
    std::vector<std::int32_t> labels;
    std::vector<float> targets;
    std::size_t valid = 0;
    std::uint64_t epoch = 0;  // of the last example placed in it
    // Copies the batch into `out`'s spans (those the data has).
    void copy_to(const BatchView& out) const;
};

class StreamPipeline {
  public:
    // Starts the threads.
    StreamPipeline(PipelineConfig config, std::unique_ptr<RecordProducer> producer);
    ~StreamPipeline();
    StreamPipeline(const StreamPipeline&) = delete;
    StreamPipeline& operator=(const StreamPipeline&) = delete;

    // The next batch; nullptr after the last batch of a one-pass stream. Throws UsageError with
    // the message of a data error (naming the file and record). `waited`, when given, is set to
    // the seconds pop() was blocked because no batch was ready.
    std::unique_ptr<ReadyBatch> pop(double* waited = nullptr);
    // Hands a popped batch's buffers back for reuse.
    void recycle(std::unique_ptr<ReadyBatch> batch);
    // Records skipped as corrupt or undecodable so far (under CorruptRecords::kSkip).
    std::uint64_t skipped() const;

  private:
    struct Chunk {
        std::uint64_t seq = 0;
        std::vector<RawRecord> raw;
        std::size_t records = 0;  // used entries of raw
        LabeledImages decoded;    // `count` examples
        std::size_t count = 0;
        std::uint64_t skipped = 0;
        std::optional<Error> error;  // at the end of this chunk's examples
        bool last = false;           // the producer ended (or failed) after this chunk
    };

    void read_loop();
    void decode_loop();
    void assemble_loop();
    // Sets stop_, wakes every thread and joins those started (the destructor, and a
    // constructor whose thread creation failed).
    void stop_threads();
    // A thread's entry: runs `loop`; an exception it throws (bad_alloc, a producer or decoder that
    // throws) stops the pipeline with an error naming `stage`, which pop() raises (never terminate).
    void run_stage(const char* stage, void (StreamPipeline::*loop)());
    void decode_chunk(Chunk& chunk, ExampleDecoder& decoder);
    // The assembler's output side: one example into the current batch; pushes full batches.
    bool emit(const LabeledImages& store, std::size_t index, std::uint64_t epoch);
    bool push_batch();
    void fail(Error e);
    std::unique_ptr<ReadyBatch> new_batch();

    PipelineConfig config_;
    std::unique_ptr<RecordProducer> producer_;
    std::string producer_label_;

    mutable std::mutex m_;
    std::condition_variable cv_room_;    // reader: room for another chunk in flight
    std::condition_variable cv_decode_;  // decoders: a chunk to decode
    std::condition_variable cv_done_;    // assembler: a decoded chunk
    std::condition_variable cv_ready_;   // consumer: a ready batch; assembler: room in the queue
    bool stop_ = false;
    std::size_t in_flight_ = 0;
    std::size_t max_in_flight_ = 4;
    std::deque<std::unique_ptr<Chunk>> to_decode_;
    std::map<std::uint64_t, std::unique_ptr<Chunk>> decoded_;
    std::vector<std::unique_ptr<Chunk>> spare_chunks_;
    std::deque<std::unique_ptr<ReadyBatch>> ready_;
    std::vector<std::unique_ptr<ReadyBatch>> spare_batches_;
    bool finished_ = false;       // no batch will follow those in ready_
    std::optional<Error> error_;  // raised by pop() once ready_ is drained
    std::uint64_t skipped_ = 0;   // decode skips (the producer counts its own)
    std::uint64_t producer_skipped_ = 0;

    // Assembler state (its thread only).
    LabeledImages shuffle_;
    std::size_t shuffle_size_ = 0;
    std::unique_ptr<ReadyBatch> filling_;
    std::size_t slot_ = 0;

    std::vector<std::thread> threads_;
};

}  // namespace psrun::worker
