#include "common/tfrecord.h"

#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <span>

#include "common/crc32c.h"

namespace psrun {
namespace {

std::uint32_t masked_crc(const void* data, std::size_t n) {
    return crc32c_mask(crc32c({static_cast<const std::byte*>(data), n}));
}

template <class T>
void put_le(std::string& out, T value) {
    for (std::size_t i = 0; i < sizeof(T); ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

template <class T>
T get_le(const char* p) {
    T value = 0;
    for (std::size_t i = 0; i < sizeof(T); ++i) value |= static_cast<T>(static_cast<std::uint8_t>(p[i])) << (8 * i);
    return value;
}

}  // namespace

void append_tfrecord(std::string& out, std::string_view data) {
    std::string header;
    put_le<std::uint64_t>(header, data.size());
    out += header;
    put_le<std::uint32_t>(out, masked_crc(header.data(), header.size()));
    out.append(data);
    put_le<std::uint32_t>(out, masked_crc(data.data(), data.size()));
}

Result<std::vector<std::string>> read_tfrecords(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    if (!in) return make_error(ErrorCode::kNotFound, path + ": cannot open");
    const std::string bytes{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
    std::vector<std::string> records;
    std::size_t pos = 0;
    while (pos < bytes.size()) {
        const auto where = path + ": record at byte " + std::to_string(pos);
        if (bytes.size() - pos < 12) return make_error(ErrorCode::kInvalidArgument, where + " is truncated");
        const char* p = bytes.data() + pos;
        const auto length = get_le<std::uint64_t>(p);
        if (get_le<std::uint32_t>(p + 8) != masked_crc(p, 8))
            return make_error(ErrorCode::kInvalidArgument, where + " has a bad length CRC");
        if (length > bytes.size() - pos - 12 || bytes.size() - pos - 12 - length < 4)
            return make_error(ErrorCode::kInvalidArgument, where + " is truncated");
        const char* data = p + 12;
        if (get_le<std::uint32_t>(data + length) != masked_crc(data, length))
            return make_error(ErrorCode::kInvalidArgument, where + " has a bad data CRC");
        records.emplace_back(data, length);
        pos += 12 + length + 4;
    }
    return records;
}

}  // namespace psrun
