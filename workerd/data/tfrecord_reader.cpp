#include "workerd/data/tfrecord_reader.h"

#include <zlib.h>

#include <cerrno>
#include <cstring>
#include <filesystem>

#include "common/crc32c.h"

namespace psrun::worker {
namespace {

std::uint64_t le64(const std::uint8_t* p) {
    std::uint64_t v = 0;
    for (int i = 7; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

std::uint32_t le32(const std::uint8_t* p) {
    return std::uint32_t{p[0]} | std::uint32_t{p[1]} << 8 | std::uint32_t{p[2]} << 16 | std::uint32_t{p[3]} << 24;
}

std::uint32_t masked_crc(const std::uint8_t* p, std::size_t n) {
    return crc32c_mask(crc32c({reinterpret_cast<const std::byte*>(p), n}));
}

class MemoryStream final : public ByteStream {
  public:
    explicit MemoryStream(const std::vector<std::uint8_t>& bytes) : bytes_(bytes) {}
    Result<std::size_t> read(std::uint8_t* dst, std::size_t n) override {
        const std::size_t got = std::min(n, bytes_.size() - pos_);
        if (got) std::memcpy(dst, bytes_.data() + pos_, got);
        pos_ += got;
        return got;
    }

  private:
    const std::vector<std::uint8_t>& bytes_;
    std::size_t pos_ = 0;
};

// zlib's gz reader: plain files pass through, gzip files are inflated.
class GzStream final : public ByteStream {
  public:
    GzStream(gzFile f, bool compressed) : f_(f), compressed_(compressed) {}
    ~GzStream() override { gzclose(f_); }
    GzStream(const GzStream&) = delete;
    GzStream& operator=(const GzStream&) = delete;
    Result<std::size_t> read(std::uint8_t* dst, std::size_t n) override {
        std::size_t got = 0;
        while (got < n) {
            const unsigned chunk = static_cast<unsigned>(std::min<std::size_t>(n - got, 1u << 30));
            const int r = gzread(f_, dst + got, chunk);
            if (r < 0) {
                int code = 0;
                const char* msg = gzerror(f_, &code);
                return make_error(ErrorCode::kInvalidArgument,
                                  std::string(compressed_ ? "corrupt gzip data (" : "read error (") +
                                      (msg != nullptr ? msg : "?") + ")");
            }
            if (r == 0) break;
            got += static_cast<std::size_t>(r);
        }
        return got;
    }

  private:
    gzFile f_;
    bool compressed_;
};

}  // namespace

Result<CorruptRecords> parse_corrupt_records(std::string_view text) {
    if (text == "error") return CorruptRecords::kError;
    if (text == "skip") return CorruptRecords::kSkip;
    return make_error(ErrorCode::kInvalidArgument,
                      "--corrupt-records '" + std::string(text) + "': expected error or skip");
}

bool looks_like_tfrecord(const std::vector<std::uint8_t>& head) {
    return head.size() >= 12 && masked_crc(head.data(), 8) == le32(head.data() + 8);
}

TfrecordReader::TfrecordReader(std::string path, std::unique_ptr<ByteStream> stream, bool compressed,
                               CorruptRecords policy)
    : path_(std::move(path)), stream_(std::move(stream)), compressed_(compressed), policy_(policy) {}

TfrecordReader::~TfrecordReader() = default;

Result<std::unique_ptr<TfrecordReader>> TfrecordReader::open(const std::string& path, CorruptRecords policy) {
    std::error_code ec;
    if (std::filesystem::is_directory(path, ec))
        return make_error(ErrorCode::kInvalidArgument, path + ": is a directory, not a TFRecord file");
    gzFile f = gzopen(path.c_str(), "rb");
    if (f == nullptr)
        return make_error(ErrorCode::kInvalidArgument, path + ": cannot open (" + std::strerror(errno) + ")");
    gzbuffer(f, 1u << 20);
    // gzdirect() is only valid after a first read: peek one byte and push it back.
    const int c = gzgetc(f);
    if (c != -1) gzungetc(c, f);
    const bool compressed = c != -1 && gzdirect(f) == 0;
    return std::make_unique<TfrecordReader>(path, std::make_unique<GzStream>(f, compressed), compressed, policy);
}

tl::unexpected<Error> TfrecordReader::fail(const std::string& problem) const {
    return make_error(ErrorCode::kInvalidArgument,
                      path_ + ": record " + std::to_string(index_) + " at offset " + std::to_string(record_offset_) +
                          (compressed_ ? " (of the inflated stream)" : "") + ": " + problem);
}

Result<std::size_t> TfrecordReader::read(std::uint8_t* dst, std::size_t n) {
    auto got = stream_->read(dst, n);
    if (!got) return fail(got.error().message);
    offset_ += *got;
    return got;
}

Result<bool> TfrecordReader::next(std::vector<std::uint8_t>& out) {
    while (!done_) {
        record_offset_ = offset_;
        index_ = next_index_++;
        std::uint8_t header[12];
        PSRUN_TRY_ASSIGN(auto n, read(header, sizeof header));
        if (n == 0) break;
        // A record that cannot be framed ends the file under kSkip (nothing after it can be trusted).
        const auto lost = [&](const std::string& problem) -> Result<bool> {
            if (policy_ == CorruptRecords::kError) return fail(problem);
            ++skipped_;
            done_ = true;
            return false;
        };
        if (n < sizeof header)
            return lost("truncated: the file ends " + std::to_string(n) + " bytes into the 12-byte record header");
        const std::uint64_t length = le64(header);
        if (masked_crc(header, 8) != le32(header + 8))
            return lost("the CRC of the length field does not match (not a TFRecord file, or corrupt from here on)");
        if (length > kMaxRecordBytes)
            return fail("length " + std::to_string(length) + " bytes exceeds the limit of " +
                        std::to_string(kMaxRecordBytes) + " bytes");
        out.resize(static_cast<std::size_t>(length));
        PSRUN_TRY_ASSIGN(auto got, read(out.data(), out.size()));
        if (got < length)
            return lost("truncated: the file ends after " + std::to_string(got) + " of its " + std::to_string(length) +
                        " data bytes");
        std::uint8_t footer[4];
        PSRUN_TRY_ASSIGN(auto f, read(footer, sizeof footer));
        if (f < sizeof footer) return lost("truncated: the file ends inside the record's data CRC");
        if (masked_crc(out.data(), out.size()) != le32(footer)) {
            if (policy_ == CorruptRecords::kError)
                return fail("the CRC of its " + std::to_string(length) +
                            " data bytes does not match (a corrupt record; --corrupt-records skip skips such records)");
            ++skipped_;
            continue;
        }
        return true;
    }
    done_ = true;
    return false;
}

Result<std::vector<std::vector<std::uint8_t>>> parse_tfrecords(const std::vector<std::uint8_t>& bytes,
                                                               const std::string& path, CorruptRecords policy,
                                                               std::uint64_t* skipped) {
    TfrecordReader reader(path, std::make_unique<MemoryStream>(bytes), false, policy);
    std::vector<std::vector<std::uint8_t>> records;
    std::vector<std::uint8_t> record;
    while (true) {
        PSRUN_TRY_ASSIGN(auto more, reader.next(record));
        if (!more) break;
        records.push_back(record);
    }
    if (skipped != nullptr) *skipped = reader.skipped();
    return records;
}

}  // namespace psrun::worker
