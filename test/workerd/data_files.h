// Test helpers for the data readers: a temporary directory and byte builders for .npy, IDX and
// CIFAR files, written by hand so that every header field can be made wrong on purpose.
#pragma once

#include <unistd.h>

#include <bit>
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

namespace psrun::worker::test {

using Bytes = std::vector<std::uint8_t>;

// A fresh directory under $TMPDIR, removed with everything in it on destruction.
struct DataDir {
    std::filesystem::path path;
    DataDir() {
        std::string t = (std::filesystem::temp_directory_path() / "data-test-XXXXXX").string();
        REQUIRE(mkdtemp(t.data()) != nullptr);
        path = t;
    }
    ~DataDir() { std::filesystem::remove_all(path); }
    DataDir(const DataDir&) = delete;
    DataDir& operator=(const DataDir&) = delete;
    std::string write(const std::string& name, const Bytes& bytes) const {
        std::ofstream out(path / name, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
        REQUIRE(out.good());
        return (path / name).string();
    }
    std::string file(const std::string& name) const { return (path / name).string(); }
};

// `bytes` little- (or big-) endian bytes of v.
// The byte writers below size their vectors first and then write into them: GCC 12's
// -Wstringop-overflow misreads push_back/insert into a small std::vector<uint8_t> at -O3 under
// some -march tunings (x86-64-v3, znver3) as writing past the end.
inline void put_int(Bytes& out, std::uint64_t v, std::size_t bytes, bool big_endian = false) {
    const std::size_t at = out.size();
    out.resize(at + bytes);
    for (std::size_t i = 0; i < bytes; ++i) {
        const std::size_t shift = 8 * (big_endian ? bytes - 1 - i : i);
        out[at + i] = static_cast<std::uint8_t>(v >> shift);
    }
}

// `out` with `tail` appended.
inline void append(Bytes& out, const std::uint8_t* tail, std::size_t size) {
    const std::size_t at = out.size();
    out.resize(at + size);
    if (size > 0) std::memcpy(out.data() + at, tail, size);
}

inline Bytes floats(const std::vector<float>& values, bool big_endian = false) {
    Bytes out;
    for (float v : values) put_int(out, std::bit_cast<std::uint32_t>(v), 4, big_endian);
    return out;
}

inline Bytes ints(const std::vector<std::int64_t>& values, std::size_t bytes, bool big_endian = false) {
    Bytes out;
    for (std::int64_t v : values) put_int(out, static_cast<std::uint64_t>(v), bytes, big_endian);
    return out;
}

// A .npy file as np.save writes it: magic, version, header length, the dict padded with spaces to
// a multiple of 64 bytes and ended by '\n', then `data`. `dict` replaces the generated dict.
inline Bytes npy(const std::string& descr, const std::vector<std::uint64_t>& shape, const Bytes& data,
                 bool fortran = false, int major = 1, const std::string& dict = "") {
    std::string text = dict;
    if (text.empty()) {
        text = "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': (";
        for (std::uint64_t d : shape) text += std::to_string(d) + ", ";
        text += "), }";
    }
    const std::size_t prefix = major == 1 ? 10 : 12;
    while ((prefix + text.size() + 1) % 64 != 0) text += ' ';
    text += '\n';
    Bytes out = {0x93, 'N', 'U', 'M', 'P', 'Y', static_cast<std::uint8_t>(major), 0};
    put_int(out, text.size(), major == 1 ? 2 : 4);
    append(out, reinterpret_cast<const std::uint8_t*>(text.data()), text.size());
    append(out, data.data(), data.size());
    return out;
}

// An IDX file: magic (0, 0, type, rank), big-endian dims, then `data`.
inline Bytes idx(std::uint8_t type, const std::vector<std::uint32_t>& dims, const Bytes& data) {
    Bytes out = {0, 0, type, static_cast<std::uint8_t>(dims.size())};
    for (std::uint32_t d : dims) put_int(out, d, 4, true);
    append(out, data.data(), data.size());
    return out;
}

// 0, 1, 2, ... (mod 256): n bytes.
inline Bytes counting(std::size_t n) {
    Bytes out(n);
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::uint8_t>(i);
    return out;
}

}  // namespace psrun::worker::test
