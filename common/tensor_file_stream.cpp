#include "common/tensor_file_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>

#include "common/crc32c.h"
#include "common/finite.h"

namespace psrun {
namespace {

using tensor_file_format::kEnd;
using tensor_file_format::kMagic;
constexpr std::size_t kBufferBytes = 1 << 20;
constexpr std::uint64_t kFillFloats = kBufferBytes / sizeof(float);  // a TensorView::fill piece

std::span<const std::byte> bytes_of(const void* data, std::size_t n) {
    return {static_cast<const std::byte*>(data), n};
}

Result<void> write_all(int fd, const char* data, std::size_t n, const std::string& path) {
    std::size_t done = 0;
    while (done < n) {
        const ssize_t w = ::write(fd, data + done, n - done);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return make_error(ErrorCode::kIo, path + ": write failed: " + std::strerror(errno));
        done += static_cast<std::size_t>(w);
    }
    return {};
}

// Reads exactly n bytes at `offset`; false on a short read or an error.
bool pread_all(int fd, void* dst, std::size_t n, std::uint64_t offset) {
    auto* out = static_cast<char*>(dst);
    std::size_t done = 0;
    while (done < n) {
        const ssize_t r = ::pread(fd, out + done, n - done, static_cast<off_t>(offset + done));
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) return false;
        done += static_cast<std::size_t>(r);
    }
    return true;
}

}  // namespace

// ---- writer ----

TensorFileWriter::TensorFileWriter(int fd, std::string path) : fd_(fd), path_(std::move(path)) {
    buffer_.reserve(kBufferBytes);
}

TensorFileWriter::TensorFileWriter(TensorFileWriter&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      buffer_(std::move(other.buffer_)),
      crc_(other.crc_),
      crcs_(std::move(other.crcs_)),
      count_(other.count_) {}

TensorFileWriter::~TensorFileWriter() { abandon(); }

void TensorFileWriter::abandon() {
    if (fd_ < 0) return;
    ::close(fd_);
    fd_ = -1;
    ::unlink(path_.c_str());
}

Result<TensorFileWriter> TensorFileWriter::create(const std::string& path) {
    const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
    if (fd < 0) return make_error(ErrorCode::kIo, path + ": cannot create: " + std::strerror(errno));
    TensorFileWriter w(fd, path);
    PSRUN_TRY(w.put(kMagic, sizeof kMagic, false));
    return w;
}

Result<void> TensorFileWriter::flush() {
    auto ok = write_all(fd_, buffer_.data(), buffer_.size(), path_);
    buffer_.clear();
    if (!ok) abandon();
    return ok;
}

Result<void> TensorFileWriter::put(const void* data, std::size_t n, bool crc) {
    if (fd_ < 0) return make_error(ErrorCode::kIo, path_ + ": write after a failure");
    if (crc) crc_ = crc32c_extend(crc_, bytes_of(data, n));
    if (buffer_.size() + n <= kBufferBytes) {
        buffer_.append(static_cast<const char*>(data), n);
        return {};
    }
    if (auto ok = flush(); !ok) return ok;
    if (n < kBufferBytes) {
        buffer_.append(static_cast<const char*>(data), n);
        return {};
    }
    auto ok = write_all(fd_, static_cast<const char*>(data), n, path_);  // large data: straight from the span
    if (!ok) abandon();
    return ok;
}

Result<void> TensorFileWriter::add(const TensorView& t) {
    crc_ = 0;
    const auto name_len = static_cast<std::uint32_t>(t.name.size());
    const auto rank = static_cast<std::uint32_t>(t.shape.size());
    const std::uint64_t count = t.count();
    Result<void> ok = put(&name_len, 4, true);
    if (ok) ok = put(t.name.data(), t.name.size(), true);
    if (ok) ok = put(&rank, 4, true);
    for (std::size_t i = 0; ok && i < t.shape.size(); ++i) ok = put(&t.shape[i], 8, true);
    if (ok) ok = put(&count, 8, true);
    if (ok && count > 0 && !t.fill) ok = put(t.data.data(), t.data.size_bytes(), true);
    if (ok && t.fill) {  // produced in pieces of the buffer's size
        std::vector<float> piece(std::min<std::uint64_t>(count, kFillFloats));
        for (std::uint64_t first = 0; ok && first < count; first += piece.size()) {
            const std::span<float> out(piece.data(), std::min<std::uint64_t>(piece.size(), count - first));
            ok = t.fill(first, out);
            if (ok) ok = put(out.data(), out.size_bytes(), true);
        }
    }
    const std::uint32_t crc = crc_;
    if (ok) ok = put(&crc, 4, false);
    if (!ok) return ok;
    crcs_.append(reinterpret_cast<const char*>(&crc), 4);
    ++count_;
    return {};
}

Result<void> TensorFileWriter::finish() {
    const std::uint32_t crc = crc32c(bytes_of(crcs_.data(), crcs_.size()));
    Result<void> ok = put(kEnd, sizeof kEnd, false);
    if (ok) ok = put(&count_, 4, false);
    if (ok) ok = put(&crc, 4, false);
    if (ok) ok = flush();
    if (!ok) return ok;
    if (::fsync(fd_) != 0) ok = make_error(ErrorCode::kIo, path_ + ": fsync failed: " + std::strerror(errno));
    const int fd = std::exchange(fd_, -1);
    if (::close(fd) != 0 && ok) ok = make_error(ErrorCode::kIo, path_ + ": close failed: " + std::strerror(errno));
    if (!ok) ::unlink(path_.c_str());
    return ok;
}

// ---- reader ----

TensorFileReader::TensorFileReader(int fd, std::string path) : fd_(fd), path_(std::move(path)) {}

TensorFileReader::TensorFileReader(TensorFileReader&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      path_(std::move(other.path_)),
      size_(other.size_),
      entries_(std::move(other.entries_)),
      verified_(other.verified_) {}

TensorFileReader::~TensorFileReader() {
    if (fd_ >= 0) ::close(fd_);
}

Result<TensorFileReader> TensorFileReader::open(const std::string& path, bool verify) {
    const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) return make_error(ErrorCode::kNotFound, path + ": cannot open");
    TensorFileReader r(fd, path);
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))
        return make_error(ErrorCode::kInvalidArgument, path + ": not a regular file");
    r.size_ = static_cast<std::uint64_t>(st.st_size);
    PSRUN_TRY(r.scan(verify));
    return r;
}

Result<void> TensorFileReader::verify() {
    if (verified_) return {};
    entries_.clear();
    return scan(true);
}

Result<void> TensorFileReader::scan(bool verify) {
    auto bad = [&](const std::string& what) { return make_error(ErrorCode::kInvalidArgument, path_ + ": " + what); };
    char magic[sizeof kMagic];
    if (size_ < sizeof kMagic || !pread_all(fd_, magic, sizeof magic, 0) ||
        std::memcmp(magic, kMagic, sizeof kMagic) != 0)
        return bad("not a psrun tensor file (bad magic)");
    std::uint64_t pos = sizeof kMagic;
    std::string crcs;
    std::vector<char> buffer;
    for (;;) {
        char probe[sizeof kEnd];
        if (size_ - pos < sizeof kEnd || !pread_all(fd_, probe, sizeof probe, pos))
            return bad("footer is missing or damaged (truncated file?)");
        if (std::memcmp(probe, kEnd, sizeof kEnd) == 0) break;
        const std::uint64_t start = pos;
        TensorFileEntry e;
        auto get = [&](void* dst, std::size_t n) {
            if (size_ - pos < n || !pread_all(fd_, dst, n, pos)) return false;
            pos += n;
            return true;
        };
        std::uint32_t name_len = 0, rank = 0;
        const std::string damaged = "tensor " + std::to_string(entries_.size()) + " has a damaged header";
        if (!get(&name_len, 4) || name_len > size_ - pos) return bad(damaged);
        e.name.resize(name_len);
        if (!get(e.name.data(), name_len) || !get(&rank, 4) || rank > 8) return bad(damaged);
        std::uint64_t expected = 1;
        for (std::uint32_t i = 0; i < rank; ++i) {
            std::uint64_t d = 0;
            if (!get(&d, 8)) return bad("tensor '" + e.name + "' is truncated");
            e.shape.push_back(d);
            if (d != 0 && expected > UINT64_MAX / d)
                return bad("tensor '" + e.name + "' has an impossible shape (element count overflows)");
            expected *= d;
        }
        if (!get(&e.count, 8) || e.count != expected || e.count > (size_ - pos) / sizeof(float))
            return bad("tensor '" + e.name + "' has a bad element count or is truncated");
        e.data_offset = pos;
        pos += e.count * sizeof(float);
        std::uint32_t crc = 0;
        if (!get(&crc, 4)) return bad("tensor '" + e.name + "' is truncated");
        if (verify) {
            // The header, then the data in whole floats: the CRC and the finite check share one read.
            buffer.resize(std::max<std::size_t>(kBufferBytes, e.data_offset - start));
            const std::size_t header = static_cast<std::size_t>(e.data_offset - start);
            if (!pread_all(fd_, buffer.data(), header, start)) return bad("tensor '" + e.name + "' is truncated");
            std::uint32_t want = crc32c_extend(0, bytes_of(buffer.data(), header));
            for (std::uint64_t at = e.data_offset; at < pos - 4;) {
                const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kBufferBytes, pos - 4 - at));
                if (!pread_all(fd_, buffer.data(), n, at)) return bad("tensor '" + e.name + "' is truncated");
                want = crc32c_extend(want, bytes_of(buffer.data(), n));
                e.finite = e.finite && all_finite(buffer.data(), n / sizeof(float));
                at += n;
            }
            if (crc != want) return bad("tensor '" + e.name + "' fails its CRC32C check");
        }
        crcs.append(reinterpret_cast<const char*>(&crc), 4);
        entries_.push_back(std::move(e));
    }
    std::uint32_t count = 0, crc = 0;
    pos += sizeof kEnd;
    if (size_ - pos != 8 || !pread_all(fd_, &count, 4, pos) || !pread_all(fd_, &crc, 4, pos + 4))
        return bad("footer is missing or damaged (truncated file?)");
    if (count != entries_.size() || crc != crc32c(bytes_of(crcs.data(), crcs.size())))
        return bad("footer does not match the tensors (count or CRC)");
    verified_ = verify;
    return {};
}

Result<void> TensorFileReader::read(std::size_t i, std::uint64_t first, std::span<float> out) const {
    const auto& e = entries_.at(i);
    if (first > e.count || out.size() > e.count - first)
        return make_error(ErrorCode::kInvalidArgument, path_ + ": read beyond tensor '" + e.name + "'");
    if (out.empty()) return {};
    if (!pread_all(fd_, out.data(), out.size_bytes(), e.data_offset + first * sizeof(float)))
        return make_error(ErrorCode::kIo, path_ + ": cannot read tensor '" + e.name + "' (file changed?)");
    return {};
}

}  // namespace psrun
