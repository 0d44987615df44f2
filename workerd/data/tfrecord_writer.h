// Writes TFRecord files (the framing of workerd/data/tfrecord_reader.h), plain or gzip (TF's
// compression_type "GZIP"), for tests, fixtures and `psrun data synthesize`. Not thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

// One framed record: length, masked CRC of the length, data, masked CRC of the data.
std::vector<std::uint8_t> frame_tfrecord(std::span<const std::uint8_t> data);

class TfrecordWriter {
  public:
    // Creates (truncates) `path`; gzip: compress the whole stream. Errors: kIo naming the path.
    [[nodiscard]] static Result<TfrecordWriter> create(const std::string& path, bool gzip);
    TfrecordWriter(TfrecordWriter&& other) noexcept;
    TfrecordWriter& operator=(TfrecordWriter&&) = delete;
    TfrecordWriter(const TfrecordWriter&) = delete;
    ~TfrecordWriter();

    [[nodiscard]] Result<void> write(std::span<const std::uint8_t> data);
    // Flushes and closes; the destructor closes too but cannot report errors.
    [[nodiscard]] Result<void> close();
    std::uint64_t bytes_written() const { return bytes_; }  // before compression

  private:
    TfrecordWriter(std::string path, void* file) : path_(std::move(path)), file_(file) {}
    std::string path_;
    void* file_;  // gzFile
    std::uint64_t bytes_ = 0;
};

}  // namespace psrun::worker
