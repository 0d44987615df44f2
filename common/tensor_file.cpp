#include "common/tensor_file.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstdint>
#include <cstring>
#include <fstream>
#include <iterator>
#include <stdexcept>

#include "common/crc32c.h"
#include "common/tensor_file_stream.h"

namespace psrun {
namespace {

using tensor_file_format::kEnd;
using tensor_file_format::kMagic;

template <class T>
void put(std::string& out, T value) {
    char bytes[sizeof(T)];
    std::memcpy(bytes, &value, sizeof(T));  // the format is little-endian, as x86-64 is
    out.append(bytes, sizeof(T));
}

std::span<const std::byte> as_bytes(std::string_view s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

// Cursor over the file's bytes; every read is bounds-checked.
struct Reader {
    std::string_view in;
    template <class T>
    bool get(T& value) {
        if (in.size() < sizeof(T)) return false;
        std::memcpy(&value, in.data(), sizeof(T));
        in.remove_prefix(sizeof(T));
        return true;
    }
    bool take(std::size_t n, std::string_view& out) {
        if (in.size() < n) return false;
        out = in.substr(0, n);
        in.remove_prefix(n);
        return true;
    }
};

}  // namespace

std::uint64_t TensorView::count() const {
    if (!fill) return data.size();
    std::uint64_t n = 1;
    for (auto d : shape) n *= d;
    return n;
}

std::string encode_tensor_file(std::span<const TensorView> tensors) {
    std::string out(kMagic, sizeof kMagic);
    std::string crcs;
    for (const auto& t : tensors) {
        const std::size_t start = out.size();
        put<std::uint32_t>(out, static_cast<std::uint32_t>(t.name.size()));
        out += t.name;
        put<std::uint32_t>(out, static_cast<std::uint32_t>(t.shape.size()));
        for (auto d : t.shape) put<std::uint64_t>(out, d);
        if (t.fill)
            throw std::invalid_argument("encode_tensor_file: tensor '" + t.name + "' is produced by fill: stream it");
        put<std::uint64_t>(out, t.data.size());
        out.append(reinterpret_cast<const char*>(t.data.data()), t.data.size_bytes());
        const std::uint32_t crc = crc32c(as_bytes(std::string_view(out).substr(start)));
        put(out, crc);
        put(crcs, crc);
    }
    out.append(kEnd, sizeof kEnd);
    put<std::uint32_t>(out, static_cast<std::uint32_t>(tensors.size()));
    put<std::uint32_t>(out, crc32c(as_bytes(crcs)));
    return out;
}

Result<void> write_tensor_file(const std::string& path, std::span<const TensorView> tensors) {
    PSRUN_TRY_ASSIGN(auto writer, TensorFileWriter::create(path));  // streams: no copy of the file in memory
    for (const auto& t : tensors)
        if (auto ok = writer.add(t); !ok) return ok;
    return writer.finish();
}

Result<std::vector<NamedTensor>> read_tensor_file(const std::string& path) {
    std::ifstream file(path, std::ios::binary);
    if (!file) return make_error(ErrorCode::kNotFound, path + ": cannot open");
    const std::string bytes{std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
    return parse_tensor_file(bytes, path);
}

Result<std::vector<NamedTensor>> parse_tensor_file(std::string_view bytes, const std::string& path) {
    auto bad = [&](const std::string& what) { return make_error(ErrorCode::kInvalidArgument, path + ": " + what); };
    Reader r{bytes};
    std::string_view magic;
    if (!r.take(sizeof kMagic, magic) || magic != std::string_view(kMagic, sizeof kMagic))
        return bad("not a psrun tensor file (bad magic)");
    std::vector<NamedTensor> tensors;
    std::string crcs;
    while (r.in.size() >= sizeof kEnd && r.in.substr(0, sizeof kEnd) != std::string_view(kEnd, sizeof kEnd)) {
        const std::string_view start = r.in;
        NamedTensor t;
        std::uint32_t name_len = 0, rank = 0;
        std::string_view name, data;
        if (!r.get(name_len) || !r.take(name_len, name) || !r.get(rank) || rank > 8)
            return bad("tensor " + std::to_string(tensors.size()) + " has a damaged header");
        t.name = std::string(name);
        std::uint64_t expected = 1, count = 0;
        for (std::uint32_t i = 0; i < rank; ++i) {
            std::uint64_t d = 0;
            if (!r.get(d)) return bad("tensor '" + t.name + "' is truncated");
            t.shape.push_back(d);
            if (d != 0 && expected > UINT64_MAX / d)  // a wrapped product could match a small count
                return bad("tensor '" + t.name + "' has an impossible shape (element count overflows)");
            expected *= d;
        }
        if (!r.get(count) || count != expected || count > r.in.size() / sizeof(float) ||
            !r.take(count * sizeof(float), data))
            return bad("tensor '" + t.name + "' has a bad element count or is truncated");
        const std::size_t covered = start.size() - r.in.size();
        std::uint32_t crc = 0;
        if (!r.get(crc)) return bad("tensor '" + t.name + "' is truncated");
        if (crc != crc32c(as_bytes(start.substr(0, covered))))
            return bad("tensor '" + t.name + "' fails its CRC32C check");
        put(crcs, crc);
        t.data.resize(count);
        if (count > 0) std::memcpy(t.data.data(), data.data(), data.size());  // data() may be null when empty
        tensors.push_back(std::move(t));
    }
    std::string_view end;
    std::uint32_t count = 0, crc = 0;
    if (!r.take(sizeof kEnd, end) || !r.get(count) || !r.get(crc) || !r.in.empty())
        return bad("footer is missing or damaged (truncated file?)");
    if (count != tensors.size() || crc != crc32c(as_bytes(crcs)))
        return bad("footer does not match the tensors (count or CRC)");
    return tensors;
}

}  // namespace psrun
