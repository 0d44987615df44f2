// Helpers of the integration tests: a private temporary directory removed at the end.
#pragma once

#include <stdlib.h>

#include <catch2/catch.hpp>

#include <filesystem>
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

}  // namespace psrun::test
