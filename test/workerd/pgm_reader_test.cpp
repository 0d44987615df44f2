// The PGM reader of `psrun predict`: binary and ASCII rasters, comments, maxval rescaling to
// 0..255, and one case per kind of bad file. Also the (N, C*H*W) .npy form predict accepts.
#include "workerd/data/pgm_reader.h"

#include <catch2/catch.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "test/workerd/data_files.h"
#include "workerd/predict_inputs.h"

namespace psrun::worker {
namespace {

std::vector<std::uint8_t> bytes_of(const std::string& text) { return {text.begin(), text.end()}; }

void expect_error(const std::string& text, const std::string& problem) {
    auto r = parse_pgm(bytes_of(text), "/d/x.pgm");
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.error().message, Catch::StartsWith("/d/x.pgm: ") && Catch::Contains(problem));
}

}  // namespace

TEST_CASE("PGM: binary and ASCII rasters with comments give the same image", "[pgm]") {
    auto binary =
        parse_pgm(bytes_of(std::string("P5\n# made by hand\n3 2\n255\n") + '\0' + "\x80\xff\x01\x02\x03"), "a.pgm");
    REQUIRE(binary);
    CHECK((binary->count == 1 && binary->channels == 1 && binary->height == 2 && binary->width == 3));
    CHECK(binary->u8 == std::vector<std::uint8_t>{0, 128, 255, 1, 2, 3});
    auto ascii = parse_pgm(bytes_of("P2 # comment after the magic\n3 # width\n2\n255\n0 128 255\n1 2 3\n"), "b.pgm");
    REQUIRE(ascii);
    CHECK(ascii->u8 == binary->u8);
    CHECK(looks_like_pgm(bytes_of("P5\n1 1 255\n\x07")));
    CHECK_FALSE(looks_like_pgm(bytes_of("P6\n1 1 255\n")));
}

TEST_CASE("PGM: a maxval below 255 is rescaled to 0..255", "[pgm]") {
    auto r = parse_pgm(bytes_of("P2\n4 1\n15\n0 1 8 15\n"), "c.pgm");
    REQUIRE(r);
    CHECK(r->u8 == std::vector<std::uint8_t>{0, 17, 136, 255});
}

TEST_CASE("PGM: bad files are refused naming the problem", "[pgm]") {
    expect_error("P6\n1 1\n255\n\x01", "not a PGM");
    expect_error("P5\n0 1\n255\n", "bad PGM width");
    expect_error("P5\n5000 1\n255\n", "bad PGM width");
    expect_error("P5\n2 x\n255\n", "bad PGM height");
    expect_error("P5\n2 2\n0\n", "bad PGM maxval");
    expect_error("P5\n1 1\n65535\n\x01\x01", "only 8-bit PGM");
    expect_error("P5\n2 2\n255\n\x01\x02", "truncated");
    expect_error("P5\n2 1\n15\n\x01\x20", "exceeds maxval");
    expect_error("P2\n2 1\n255\n1\n", "pixel 1 of 2 is missing");
    expect_error("P2\n2 1\n15\n1 16\n", "above maxval 15");
    expect_error("P2\n1 1\n255\n1 2\n", "bytes after the image");
    expect_error("P5\n1 1\n255", "no whitespace after the PGM maxval");
}

TEST_CASE("predict inputs: an (N, C*H*W) .npy is read as N images of the model's shape", "[pgm][predict]") {
    const auto dir = std::filesystem::temp_directory_path() / ("psrun-flat-" + std::to_string(::getpid()));
    std::filesystem::create_directories(dir);
    const auto flat = dir / "flat.npy", wrong = dir / "wrong.npy";
    auto write = [](const std::filesystem::path& p, const test::Bytes& b) {
        std::ofstream(p, std::ios::binary)
            .write(reinterpret_cast<const char*>(b.data()), static_cast<std::streamsize>(b.size()));
    };
    write(flat, test::npy("<f4", {2, 6}, test::floats({0, .1f, .2f, .3f, .4f, .5f, 1, 1, 1, 0, 0, 0})));
    write(wrong, test::npy("|u1", {2, 5}, test::counting(10)));
    const ModelInput model{"m", 1, 2, 3, 10};
    auto r = load_predict_inputs({flat.string()}, model);
    REQUIRE(r);
    CHECK((r->images.images.count == 2 && r->images.images.height == 2 && r->images.images.width == 3));
    CHECK(r->images.images.f32[1] == .1f);
    CHECK(r->images.labels == std::vector<std::int32_t>{0, 0});
    CHECK(r->names == std::vector<std::string>{"", ""});
    auto bad = load_predict_inputs({wrong.string()}, model);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("(N, 5) are flat") && Catch::Contains("takes 1x2x3 = 6"));
    std::filesystem::remove_all(dir);
}

}  // namespace psrun::worker
