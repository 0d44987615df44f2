// Streaming tensor files (common/tensor_file_stream.h): the writer's bytes are encode_tensor_file's,
// the reader checks CRCs in constant memory, reads pieces, flags non-finite tensors and refuses
// damage with read_tensor_file's messages.
#include "common/tensor_file_stream.h"

#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <limits>

namespace fs = std::filesystem;
using namespace psrun;

namespace {
std::string slurp(const std::string& path) {
    std::ifstream f(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>()};
}
}  // namespace

TEST_CASE("streamed tensor files equal the in-memory encoding and read back in pieces", "[tensor_file]") {
    const fs::path dir = fs::temp_directory_path() / ("psrun-tfs-" + std::to_string(::getpid()));
    fs::create_directories(dir);
    const std::string path = (dir / "big.tensors").string();
    std::vector<float> big(3 * (1 << 18) + 17);  // larger than the writer's and reader's buffers
    for (std::size_t i = 0; i < big.size(); ++i) big[i] = static_cast<float>(i) * 0.5f;
    std::vector<float> small{1.0f, std::numeric_limits<float>::quiet_NaN()}, none;
    const std::vector<TensorView> views{{"big", {big.size()}, big}, {"small", {2}, small}, {"empty", {0}, none}};
    {
        auto w = TensorFileWriter::create(path);
        REQUIRE(w);
        for (const auto& v : views) REQUIRE(w->add(v));
        REQUIRE(w->finish());
    }
    CHECK(slurp(path) == encode_tensor_file(views));

    auto r = TensorFileReader::open(path);
    REQUIRE(r);
    REQUIRE(r->tensors().size() == 3);
    CHECK(r->tensors()[0].name == "big");
    CHECK(r->tensors()[0].count == big.size());
    CHECK(r->tensors()[0].finite);
    CHECK_FALSE(r->tensors()[1].finite);
    CHECK(r->tensors()[2].count == 0);
    std::vector<float> piece(1000);
    REQUIRE(r->read(0, 600000, piece));
    CHECK(piece[0] == 300000.0f);
    CHECK(piece[999] == 300499.5f);
    CHECK_FALSE(r->read(0, big.size() - 10, piece));  // beyond the tensor

    SECTION("an unverified open indexes the headers; verify() finds a flipped byte") {
        {
            std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
            f.seekp(static_cast<std::streamoff>(r->tensors()[0].data_offset + 4 * 500000));
            f.put('\x7f');
        }
        auto lazy = TensorFileReader::open(path, false);
        REQUIRE(lazy);
        CHECK_FALSE(lazy->verified());
        auto checked = lazy->verify();
        REQUIRE_FALSE(checked);
        CHECK_THAT(checked.error().message, Catch::Contains("tensor 'big' fails its CRC32C check"));
        auto strict = TensorFileReader::open(path);
        REQUIRE_FALSE(strict);
        CHECK(strict.error().message == checked.error().message);
        CHECK_FALSE(read_tensor_file(path));
    }
    SECTION("truncation and garbage are refused as read_tensor_file refuses them") {
        fs::resize_file(path, fs::file_size(path) - 5);
        auto t = TensorFileReader::open(path);
        REQUIRE_FALSE(t);
        CHECK(t.error().message == read_tensor_file(path).error().message);
        std::ofstream(path, std::ios::trunc) << "hello";
        auto g = TensorFileReader::open(path);
        REQUIRE_FALSE(g);
        CHECK(g.error().message == read_tensor_file(path).error().message);
    }
    SECTION("a writer abandoned before finish() leaves no file") {
        const std::string partial = (dir / "partial.tensors").string();
        {
            auto w = TensorFileWriter::create(partial);
            REQUIRE(w);
            REQUIRE(w->add(views[0]));
        }
        CHECK_FALSE(fs::exists(partial));
    }
    fs::remove_all(dir);
}
