// Helpers of the integration tests: a private temporary directory removed at the end; a damaged byte.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <string>

namespace psrun::test {

struct TempTree {
    std::filesystem::path path;
    TempTree() {
        std::string pattern = (std::filesystem::temp_directory_path() / "psrun-it.XXXXXX").string();
        REQUIRE(::mkdtemp(pattern.data()) != nullptr);
        path = pattern;
    }
    ~TempTree() {
        std::error_code ec;
        std::filesystem::remove_all(path, ec);
    }
};

// Inverts the byte at `offset` of the file at `path`: damaged whatever it held (setting a fixed
// value would leave a byte that already held it intact).
inline void flip_byte(const std::filesystem::path& path, std::streamoff offset) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    REQUIRE(f);
    f.seekg(offset);
    const int byte = f.get();
    REQUIRE(byte != std::char_traits<char>::eof());
    f.seekp(offset);
    f.put(static_cast<char>(~byte));
    REQUIRE(f.good());
}

}  // namespace psrun::test
