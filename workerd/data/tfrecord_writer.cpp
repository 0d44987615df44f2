#include "workerd/data/tfrecord_writer.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>

#include "common/crc32c.h"

namespace psrun::worker {
namespace {

void put_le(std::vector<std::uint8_t>& out, std::uint64_t v, int bytes) {
    for (int i = 0; i < bytes; ++i) out.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
}

std::uint32_t masked_crc(std::span<const std::uint8_t> s) {
    return crc32c_mask(crc32c({reinterpret_cast<const std::byte*>(s.data()), s.size()}));
}

}  // namespace

std::vector<std::uint8_t> frame_tfrecord(std::span<const std::uint8_t> data) {
    std::vector<std::uint8_t> out;
    out.reserve(data.size() + 16);
    put_le(out, data.size(), 8);
    put_le(out, masked_crc({out.data(), 8}), 4);
    out.insert(out.end(), data.begin(), data.end());
    put_le(out, masked_crc(data), 4);
    return out;
}

Result<TfrecordWriter> TfrecordWriter::create(const std::string& path, bool gzip) {
    gzFile f = gzopen(path.c_str(), gzip ? "wb6" : "wbT");  // T: write without compression
    if (f == nullptr) return make_error(ErrorCode::kIo, path + ": cannot create (" + std::strerror(errno) + ")");
    gzbuffer(f, 1u << 20);
    return TfrecordWriter(path, f);
}

TfrecordWriter::TfrecordWriter(TfrecordWriter&& other) noexcept
    : path_(std::move(other.path_)), file_(other.file_), bytes_(other.bytes_) {
    other.file_ = nullptr;
}

TfrecordWriter::~TfrecordWriter() {
    if (file_ != nullptr) gzclose(static_cast<gzFile>(file_));
}

Result<void> TfrecordWriter::write(std::span<const std::uint8_t> data) {
    const std::vector<std::uint8_t> framed = frame_tfrecord(data);
    std::size_t done = 0;
    while (done < framed.size()) {
        const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(framed.size() - done, 1u << 30));
        if (gzwrite(static_cast<gzFile>(file_), framed.data() + done, chunk) != static_cast<int>(chunk))
            return make_error(ErrorCode::kIo, path_ + ": write failed");
        done += chunk;
    }
    bytes_ += framed.size();
    return {};
}

Result<void> TfrecordWriter::close() {
    if (file_ == nullptr) return {};
    const int rc = gzclose(static_cast<gzFile>(file_));
    file_ = nullptr;
    if (rc != Z_OK) return make_error(ErrorCode::kIo, path_ + ": cannot finish writing (disk full?)");
    return {};
}

}  // namespace psrun::worker
