// The first stage of a stream (workerd/data/stream_pipeline.h), run on its reader thread: the
// raw records in the order the stream uses them.
//  - FolderProducer: image files of a folder, each its own record with its class label. Training
//    draws them through the Sampler (this worker's shard, reshuffled every epoch, seek exact);
//    a pass reads them in order.
//  - TfrecordProducer: the records of a list of TFRecord files. Training reads this worker's
//    files, every epoch in a new order drawn from (seed, shard, epoch, restart key), forever; a
//    pass reads every file once in the given order. With fewer files than workers each worker
//    reads every file and keeps the records r of file f with (f + r) mod n == i (disjoint
//    shares that cover the data).
// Producers are used by one thread at a time.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/sampler.h"
#include "workerd/data/tfrecord_reader.h"

namespace psrun::worker {

struct RawRecord {
    std::vector<std::uint8_t> bytes;  // a serialized tf.train.Example, or a whole image file
    std::uint32_t file = 0;           // index into the producer's file list
    std::uint64_t index = 0;          // record number within the file (0 for image files)
    std::uint64_t offset = 0;         // byte offset of a TFRecord record
    std::int32_t label = -1;          // image files: the folder's class
    std::uint64_t epoch = 0;
};

class RecordProducer {
  public:
    virtual ~RecordProducer() = default;
    // The next record into `out` (its buffer reused); false at the end of a pass (training
    // producers never end). Errors (kInvalidArgument) name the file and record.
    [[nodiscard]] virtual Result<bool> next(RawRecord& out) = 0;
    // "F" or "F: record 17 at offset 4096", for messages about a record.
    virtual std::string describe(const RawRecord& r) const = 0;
    virtual bool examples() const = 0;                   // records are tf.train.Example (else image files)
    virtual std::uint64_t skipped() const { return 0; }  // corrupt records skipped so far
};

// Reads a whole (small) file. Errors name it.
[[nodiscard]] Result<void> read_whole_file(const std::string& path, std::vector<std::uint8_t>& out);

class FolderProducer final : public RecordProducer {
  public:
    // Training: `files` drawn by Sampler(files.size(), seed, shard) from position `start`
    // (examples drawn before). Pass: in order (seed, shard and start unused).
    FolderProducer(std::shared_ptr<const std::vector<std::string>> files,
                   std::shared_ptr<const std::vector<std::int32_t>> labels, bool training, std::uint64_t seed,
                   ShardSpec shard, std::uint64_t start);
    Result<bool> next(RawRecord& out) override;
    std::string describe(const RawRecord& r) const override { return (*files_)[r.file]; }
    bool examples() const override { return false; }

  private:
    std::shared_ptr<const std::vector<std::string>> files_;
    std::shared_ptr<const std::vector<std::int32_t>> labels_;
    bool training_;
    std::unique_ptr<Sampler> sampler_;
    std::size_t next_ = 0;
    std::uint32_t index_ = 0;
};

// Which files of `all` worker `shard` reads, and whether records are split instead (fewer files
// than workers: every file, with records_shard set).
struct FileShare {
    std::vector<std::string> files;
    std::vector<std::uint32_t> global_index;  // of each file in `all`
    bool split_records = false;
};
FileShare share_files(const std::vector<std::string>& all, ShardSpec shard);

class TfrecordProducer final : public RecordProducer {
  public:
    // Training: endless epochs over `share`, each epoch's file order a permutation drawn from
    // (seed, shard.index, restart_key, epoch). Pass: share.files once, in order.
    TfrecordProducer(FileShare share, ShardSpec shard, bool training, std::uint64_t seed, std::uint64_t restart_key,
                     CorruptRecords policy);
    Result<bool> next(RawRecord& out) override;
    std::string describe(const RawRecord& r) const override;
    bool examples() const override { return true; }
    std::uint64_t skipped() const override { return skipped_ + (reader_ ? reader_->skipped() : 0); }

  private:
    void draw_order();  // order_ for epoch_
    Result<bool> open_next_file();

    FileShare share_;
    ShardSpec shard_;
    bool training_;
    std::uint64_t seed_;
    std::uint64_t restart_key_;
    CorruptRecords policy_;
    std::vector<std::uint32_t> order_;  // this epoch's file order (indices into share_.files)
    std::size_t next_file_ = 0;
    std::uint32_t current_ = 0;  // index into share_.files of the open file
    std::unique_ptr<TfrecordReader> reader_;
    std::uint64_t epoch_ = 0;
    std::uint64_t records_this_epoch_ = 0;
    std::uint64_t skipped_ = 0;  // of files already closed
};

}  // namespace psrun::worker
