// Streaming access to tensor files (common/tensor_file.h has the format) for files too large to
// hold in memory, such as a psd shard holding its part of a sparse table: the writer sends each
// tensor's floats to the file through a fixed 1 MiB buffer, the reader checks every CRC while
// streaming through the file and then reads pieces of tensors on demand. Both produce and accept
// exactly the bytes of encode_tensor_file()/parse_tensor_file(). Not thread-safe; move-only.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "common/tensor_file.h"

namespace psrun {

// The framing both the whole-file reader (tensor_file.h) and the stream share: these 8 bytes
// open and close every tensor file.
namespace tensor_file_format {
inline constexpr char kMagic[8] = {'P', 'S', 'R', 'U', 'N', 'T', 'F', '1'};
inline constexpr char kEnd[8] = {'P', 'S', 'R', 'U', 'N', 'E', 'N', 'D'};
}  // namespace tensor_file_format

class TensorFileWriter {
  public:
    // Creates (truncates) `path`, mode 0644. kIo naming the path and the system error.
    [[nodiscard]] static Result<TensorFileWriter> create(const std::string& path);
    TensorFileWriter(TensorFileWriter&& other) noexcept;
    TensorFileWriter& operator=(TensorFileWriter&&) = delete;
    ~TensorFileWriter();  // a file not finish()ed is removed

    // Appends one tensor (its data are read once, straight from the span).
    [[nodiscard]] Result<void> add(const TensorView& tensor);
    // Writes the footer, fsyncs and closes. On any failure (disk full included) the file is removed.
    [[nodiscard]] Result<void> finish();

  private:
    TensorFileWriter(int fd, std::string path);
    [[nodiscard]] Result<void> put(const void* data, std::size_t bytes, bool crc);
    [[nodiscard]] Result<void> flush();
    void abandon();

    int fd_ = -1;
    std::string path_;
    std::string buffer_;
    std::uint32_t crc_ = 0;  // of the tensor being written
    std::string crcs_;       // every tensor's CRC, for the footer
    std::uint32_t count_ = 0;
};

struct TensorFileEntry {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::uint64_t count = 0;        // floats
    std::uint64_t data_offset = 0;  // in bytes from the start of the file
    bool finite = true;             // every float is finite (known once the file was verified)
};

class TensorFileReader {
  public:
    // Opens `path` and checks its structure; with `verify`, also every tensor's CRC32C and the
    // footer, reading the file once through a fixed buffer (and noting which tensors hold a NaN
    // or Inf: TensorFileEntry::finite). Errors as read_tensor_file(): kNotFound
    // (cannot open), kInvalidArgument naming the file and the tensor for any damage.
    [[nodiscard]] static Result<TensorFileReader> open(const std::string& path, bool verify = true);
    TensorFileReader(TensorFileReader&& other) noexcept;
    TensorFileReader& operator=(TensorFileReader&&) = delete;
    ~TensorFileReader();

    const std::string& path() const { return path_; }
    const std::vector<TensorFileEntry>& tensors() const { return entries_; }
    bool verified() const { return verified_; }
    // verify() after an open without it.
    [[nodiscard]] Result<void> verify();
    // Floats [first, first + out.size()) of tensor i. REQUIRES i < tensors().size(). kInvalidArgument
    // when the range is outside the tensor, kIo on a read error or a file that shrank.
    [[nodiscard]] Result<void> read(std::size_t i, std::uint64_t first, std::span<float> out) const;

  private:
    TensorFileReader(int fd, std::string path);
    [[nodiscard]] Result<void> scan(bool verify);

    int fd_ = -1;
    std::string path_;
    std::uint64_t size_ = 0;
    std::vector<TensorFileEntry> entries_;
    bool verified_ = false;
};

}  // namespace psrun
