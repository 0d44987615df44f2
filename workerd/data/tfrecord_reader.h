// Reader for TFRecord files, the record framing of TensorFlow's TFRecordWriter:
//   uint64 length (little-endian) | uint32 masked CRC-32C of those 8 bytes |
//   length bytes of data        | uint32 masked CRC-32C of the data
// where masked(c) = ((c >> 15) | (c << 17)) + 0xa282ead8 (common/crc32c.h). A file that starts
// with the gzip magic bytes is read as TF's compression_type "GZIP" (zlib, inflated as it is
// read; offsets then count uncompressed bytes). Reads sequentially through a 1 MiB buffer, so
// memory does not grow with the file. Not thread-safe: one reader per thread.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

// What to do with a record whose CRC does not match or that cannot be framed.
enum class CorruptRecords {
    kError,  // fail, naming the file and the record's offset (the default)
    kSkip,   // skip it and count it; a bad length CRC loses the framing: the rest of the file is skipped
};
[[nodiscard]] Result<CorruptRecords> parse_corrupt_records(std::string_view text);  // error|skip

// Largest record accepted (a corrupt length could otherwise ask for gigabytes).
inline constexpr std::uint64_t kMaxRecordBytes = std::uint64_t{256} << 20;

// Where a reader's bytes come from: a file through zlib's gz reader, or memory.
class ByteStream {
  public:
    virtual ~ByteStream() = default;
    // Up to n bytes into dst; fewer only at the end. Errors: a message without the path.
    virtual Result<std::size_t> read(std::uint8_t* dst, std::size_t n) = 0;
};

class TfrecordReader {
  public:
    // Opens `path` (gzip or not). Missing or unreadable: kInvalidArgument naming it.
    [[nodiscard]] static Result<std::unique_ptr<TfrecordReader>> open(const std::string& path, CorruptRecords policy);
    ~TfrecordReader();
    TfrecordReader(const TfrecordReader&) = delete;
    TfrecordReader& operator=(const TfrecordReader&) = delete;

    // Reads the next record's data into `out`. true: a record; false: the end of the file.
    // kInvalidArgument "<path>: record N at offset O: <problem>" for a truncated record, a CRC
    // mismatch (kError), an oversized length, or a read error.
    [[nodiscard]] Result<bool> next(std::vector<std::uint8_t>& out);
    // Of the record next() returned last: its number (0-based, skipped ones counted) and offset.
    std::uint64_t record_index() const { return index_; }
    std::uint64_t record_offset() const { return record_offset_; }
    // Records skipped under CorruptRecords::kSkip (a lost framing counts as one).
    std::uint64_t skipped() const { return skipped_; }
    bool compressed() const { return compressed_; }
    const std::string& path() const { return path_; }

    // A reader over any stream; `path` names it in messages.
    TfrecordReader(std::string path, std::unique_ptr<ByteStream> stream, bool compressed, CorruptRecords policy);

  private:
    // Reads exactly n bytes (fewer only at the end of the file); returns how many.
    Result<std::size_t> read(std::uint8_t* dst, std::size_t n);
    tl::unexpected<Error> fail(const std::string& problem) const;

    std::string path_;
    std::unique_ptr<ByteStream> stream_;
    bool compressed_;
    CorruptRecords policy_;
    std::uint64_t offset_ = 0;  // bytes consumed
    std::uint64_t record_offset_ = 0;
    std::uint64_t index_ = 0;
    std::uint64_t next_index_ = 0;
    std::uint64_t skipped_ = 0;
    bool done_ = false;
};

// Parses a whole in-memory TFRecord stream (already inflated) into its records' data, for
// tests and fuzzing; the same checks and messages as the reader (`path` names it).
[[nodiscard]] Result<std::vector<std::vector<std::uint8_t>>> parse_tfrecords(const std::vector<std::uint8_t>& bytes,
                                                                             const std::string& path,
                                                                             CorruptRecords policy,
                                                                             std::uint64_t* skipped = nullptr);

// True when `bytes` (a file's first bytes, at least 12) start with a well-framed record: the
// masked CRC of the first 8 bytes matches the next 4. TFRecord files have no magic number.
bool looks_like_tfrecord(const std::vector<std::uint8_t>& head);

}  // namespace psrun::worker
