#include "workerd/data/npz_reader.h"

#include <zlib.h>

#include <algorithm>
#include <cstring>

#include "workerd/data/reader_common.h"

namespace psrun::worker {
namespace {

constexpr std::uint32_t kEocd = 0x06054b50, kEocd64 = 0x06064b50, kLocator64 = 0x07064b50, kCentral = 0x02014b50,
                        kLocal = 0x04034b50;

std::uint64_t le(const std::uint8_t* p, int n) {
    std::uint64_t v = 0;
    for (int i = n - 1; i >= 0; --i) v = (v << 8) | p[i];
    return v;
}

// Bounds-checked view: at(offset, n) is null when [offset, offset + n) is outside the archive.
struct View {
    const std::vector<std::uint8_t>& b;
    const std::uint8_t* at(std::uint64_t offset, std::uint64_t n) const {
        if (offset > b.size() || n > b.size() - offset) return nullptr;
        return b.data() + offset;
    }
};

}  // namespace

Result<std::vector<NpzMember>> list_npz(const std::vector<std::uint8_t>& zip, const std::string& path) {
    const View v{zip};
    if (zip.size() < 22) return bad_file(path, "too short for a zip (.npz) archive");
    // The end-of-central-directory record: the last one within the final 64 KiB + 22 bytes.
    std::uint64_t eocd = zip.size();
    const std::uint64_t lowest = zip.size() > 65557 ? zip.size() - 65557 : 0;
    for (std::uint64_t i = zip.size() - 22 + 1; i-- > lowest;)
        if (le(zip.data() + i, 4) == kEocd) {
            eocd = i;
            break;
        }
    if (eocd == zip.size()) return bad_file(path, "not a zip (.npz) archive: no end-of-central-directory record");
    const std::uint8_t* e = zip.data() + eocd;
    std::uint64_t entries = le(e + 10, 2), cd_size = le(e + 12, 4), cd_offset = le(e + 16, 4);
    if (entries == 0xffff || cd_size == 0xffffffff || cd_offset == 0xffffffff) {  // zip64
        const std::uint8_t* loc = eocd >= 20 ? v.at(eocd - 20, 20) : nullptr;
        if (loc == nullptr || le(loc, 4) != kLocator64) return bad_file(path, "zip64 archive without its locator");
        const std::uint8_t* e64 = v.at(le(loc + 8, 8), 56);
        if (e64 == nullptr || le(e64, 4) != kEocd64) return bad_file(path, "damaged zip64 end-of-central-directory");
        entries = le(e64 + 32, 8);
        cd_size = le(e64 + 40, 8);
        cd_offset = le(e64 + 48, 8);
    }
    if (v.at(cd_offset, cd_size) == nullptr) return bad_file(path, "its central directory lies outside the file");
    std::vector<NpzMember> out;
    std::uint64_t pos = cd_offset;
    for (std::uint64_t k = 0; k < entries; ++k) {
        const std::uint8_t* c = v.at(pos, 46);
        if (c == nullptr || pos + 46 > cd_offset + cd_size || le(c, 4) != kCentral)
            return bad_file(path, "damaged central directory (entry " + std::to_string(k) + ")");
        NpzMember m;
        m.method = static_cast<std::uint16_t>(le(c + 10, 2));
        m.crc = static_cast<std::uint32_t>(le(c + 16, 4));
        m.compressed = le(c + 20, 4);
        m.size = le(c + 24, 4);
        const std::uint64_t name_len = le(c + 28, 2), extra_len = le(c + 30, 2), comment_len = le(c + 32, 2);
        m.local_offset = le(c + 42, 4);
        const std::uint8_t* name = v.at(pos + 46, name_len);
        const std::uint8_t* extra = v.at(pos + 46 + name_len, extra_len);
        if (name == nullptr || extra == nullptr) return bad_file(path, "damaged central directory entry");
        m.name.assign(reinterpret_cast<const char*>(name), name_len);
        // The zip64 extra field holds, in order, the 32-bit fields that read 0xffffffff.
        for (std::uint64_t x = 0; x + 4 <= extra_len;) {
            const std::uint64_t id = le(extra + x, 2), len = le(extra + x + 2, 2);
            if (x + 4 + len > extra_len) break;
            if (id == 1) {
                std::uint64_t f = x + 4;
                auto take = [&](std::uint64_t& field) {
                    if (field == 0xffffffff && f + 8 <= x + 4 + len) {
                        field = le(extra + f, 8);
                        f += 8;
                    }
                };
                take(m.size);
                take(m.compressed);
                take(m.local_offset);
            }
            x += 4 + len;
        }
        if (m.name.size() > 4 && m.name.compare(m.name.size() - 4, 4, ".npy") == 0) m.name.resize(m.name.size() - 4);
        out.push_back(std::move(m));
        pos += 46 + name_len + extra_len + comment_len;
    }
    return out;
}

Result<std::vector<std::uint8_t>> read_npz_member(const std::vector<std::uint8_t>& zip,
                                                  const std::vector<NpzMember>& members, const std::string& name,
                                                  const std::string& path) {
    const auto it = std::find_if(members.begin(), members.end(), [&](const NpzMember& m) { return m.name == name; });
    if (it == members.end()) {
        std::string have;
        for (const auto& m : members) have += (have.empty() ? "" : ", ") + m.name;
        return bad_file(path, "no array '" + name + "' (it holds: " + (have.empty() ? "none" : have) + ")");
    }
    const std::string where = path + " array '" + name + "'";
    const View v{zip};
    const std::uint8_t* local = v.at(it->local_offset, 30);
    if (local == nullptr || le(local, 4) != kLocal) return bad_file(where, "damaged local header");
    const std::uint64_t start = it->local_offset + 30 + le(local + 26, 2) + le(local + 28, 2);
    const std::uint8_t* data = v.at(start, it->compressed);
    if (data == nullptr) return bad_file(where, "its data runs past the end of the archive (truncated .npz?)");
    if (it->size > kMaxInflatedBytes) return bad_file(where, "larger than 4 GiB");
    // Deflate expands at most 1032:1: a larger declared size is a damaged header, not memory to reserve.
    if (it->method == 8 && it->size > it->compressed * 1032 + 1024)
        return bad_file(where, "declares " + std::to_string(it->size) + " bytes from " +
                                   std::to_string(it->compressed) +
                                   " compressed, more than deflate can produce (damaged archive?)");
    std::vector<std::uint8_t> out;
    if (it->method == 0) {
        if (it->compressed != it->size) return bad_file(where, "stored member whose sizes differ");
        out.assign(data, data + it->size);
    } else if (it->method == 8) {
        out.resize(it->size);
        z_stream zs{};
        if (inflateInit2(&zs, -15) != Z_OK) return bad_file(where, "cannot initialise zlib");
        std::uint64_t in_done = 0;
        int rc = Z_OK;
        while (rc == Z_OK) {
            const std::uint64_t in_left = it->compressed - in_done;
            zs.next_in = const_cast<Bytef*>(data + in_done);
            zs.avail_in = static_cast<uInt>(std::min<std::uint64_t>(in_left, 1u << 30));
            zs.next_out = out.data() + zs.total_out;
            zs.avail_out = static_cast<uInt>(std::min<std::uint64_t>(out.size() - zs.total_out, 1u << 30));
            const uInt before = zs.avail_in;
            const uLong out_before = zs.total_out;
            rc = inflate(&zs, Z_NO_FLUSH);
            in_done += before - zs.avail_in;
            if (rc == Z_BUF_ERROR && before - zs.avail_in == 0 && zs.total_out == out_before) break;  // no progress
            if (rc == Z_BUF_ERROR) rc = Z_OK;
        }
        inflateEnd(&zs);
        if (rc != Z_STREAM_END || zs.total_out != out.size()) return bad_file(where, "corrupt deflate data");
    } else {
        return bad_file(where, "compression method " + std::to_string(it->method) + " (only stored and deflate)");
    }
    uLong crc = crc32(0, nullptr, 0);
    for (std::size_t off = 0; off < out.size(); off += 1u << 30)
        crc = crc32(crc, out.data() + off, static_cast<uInt>(std::min<std::size_t>(out.size() - off, 1u << 30)));
    if (static_cast<std::uint32_t>(crc) != it->crc) return bad_file(where, "CRC-32 mismatch (a corrupt archive)");
    return out;
}

}  // namespace psrun::worker
