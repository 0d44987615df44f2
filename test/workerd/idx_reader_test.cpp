// The IDX reader on good files (raw and gzip) and on every kind of bad file.
#include <catch2/catch.hpp>

#include <unistd.h>
#include <zlib.h>

#include <filesystem>
#include <fstream>

#include "workerd/data/idx_reader.h"

namespace psrun::worker {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<std::uint8_t>;

struct TempDir {
    fs::path path;
    TempDir() {
        std::string t = (fs::temp_directory_path() / "idx-test-XXXXXX").string();
        REQUIRE(mkdtemp(t.data()) != nullptr);
        path = t;
    }
    ~TempDir() { fs::remove_all(path); }
    std::string write(const std::string& name, const Bytes& bytes) const {
        std::ofstream out(path / name, std::ios::binary);
        out.write(reinterpret_cast<const char*>(bytes.data()), static_cast<long>(bytes.size()));
        return (path / name).string();
    }
};

void put_be32(Bytes& b, std::uint32_t v) {
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<std::uint8_t>(v >> s));
}

Bytes images_file(std::uint32_t count, std::uint32_t rows, std::uint32_t cols, std::uint32_t magic = kIdxImagesMagic) {
    Bytes b;
    put_be32(b, magic);
    put_be32(b, count);
    put_be32(b, rows);
    put_be32(b, cols);
    for (std::uint32_t i = 0; i < count * rows * cols; ++i) b.push_back(static_cast<std::uint8_t>(i));
    return b;
}

Bytes labels_file(const Bytes& labels, std::uint32_t magic = kIdxLabelsMagic) {
    Bytes b;
    put_be32(b, magic);
    put_be32(b, static_cast<std::uint32_t>(labels.size()));
    b.insert(b.end(), labels.begin(), labels.end());
    return b;
}

Bytes gzip(const Bytes& in) {
    z_stream zs{};
    REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    Bytes out(in.size() + 1024);
    zs.next_in = const_cast<Bytef*>(in.data());
    zs.avail_in = static_cast<uInt>(in.size());
    zs.next_out = out.data();
    zs.avail_out = static_cast<uInt>(out.size());
    REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
    out.resize(zs.total_out);
    deflateEnd(&zs);
    return out;
}

// The error for `bytes` parsed as images (or labels) must name the file and contain `problem`.
void expect_images_error(const Bytes& bytes, const std::string& problem) {
    TempDir dir;
    const std::string path = dir.write("bad-images", bytes);
    auto r = read_idx_images(path);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains(path) && Catch::Contains(problem));
}

void expect_labels_error(const Bytes& bytes, const std::string& problem) {
    TempDir dir;
    const std::string path = dir.write("bad-labels", bytes);
    auto r = read_idx_labels(path);
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains(path) && Catch::Contains(problem));
}

}  // namespace

TEST_CASE("IDX images and labels are read raw and gzip-compressed", "[idx]") {
    TempDir dir;
    const Bytes images = images_file(3, 2, 4);
    const Bytes labels = labels_file({7, 0, 9});
    dir.write("train-images-idx3-ubyte", images);
    dir.write("train-labels-idx1-ubyte.gz", gzip(labels));
    auto split = load_split(dir.path.string(), "train");
    REQUIRE(split);
    CHECK(split->size() == 3);
    CHECK(split->images.channels == 1);
    CHECK(split->images.height == 2);
    CHECK(split->images.width == 4);
    CHECK(split->images.type == PixelType::kUint8);
    CHECK(split->images.u8[2 * 8] == 16);
    CHECK(split->labels == std::vector<std::int32_t>{7, 0, 9});

    const std::string gz = dir.write("x.gz", gzip(images));
    auto from_gz = read_idx_images(gz);
    REQUIRE(from_gz);
    CHECK(from_gz->u8 == Bytes(images.begin() + 16, images.end()));
}

TEST_CASE("IDX reader rejects each kind of bad file with the file name", "[idx]") {
    const Bytes good = images_file(2, 3, 3);
    SECTION("missing file") {
        auto r = read_idx_images("/nonexistent/dir/train-images-idx3-ubyte");
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::kNotFound);
        CHECK_THAT(r.error().message, Catch::Contains("/nonexistent/dir/train-images-idx3-ubyte"));
    }
    SECTION("empty or short header") {
        expect_images_error({}, "too short");
        expect_images_error(Bytes(good.begin(), good.begin() + 10), "too short");
        expect_labels_error({0, 0, 8}, "too short");
    }
    SECTION("wrong magic (labels given as images and vice versa)") {
        expect_images_error(labels_file({1, 2, 3, 4, 5, 6, 7, 8, 9}), "bad magic");
        expect_labels_error(good, "bad magic");
        expect_images_error(images_file(2, 3, 3, 0x00000c03), "bad magic");  // int32 data
        expect_images_error(images_file(2, 3, 3, 0x00000802), "bad magic");  // rank 2
    }
    SECTION("zero dimensions") {
        expect_images_error(images_file(0, 3, 3), "bad dimensions");
        expect_images_error(images_file(2, 0, 3), "bad dimensions");
        expect_labels_error(labels_file({}), "no labels");
    }
    SECTION("length does not match the header") {
        expect_images_error(Bytes(good.begin(), good.end() - 1), "truncated");
        Bytes longer = good;
        longer.push_back(0);
        expect_images_error(longer, "1 trailing bytes");
        Bytes labels = labels_file({1, 2, 3});
        labels.pop_back();
        expect_labels_error(labels, "truncated");
    }
    SECTION("absurd dimensions are refused before allocating") {
        Bytes huge = images_file(1, 2, 2);
        for (int i = 4; i < 8; ++i) huge[static_cast<std::size_t>(i)] = 0xff;  // 4294967295 images
        expect_images_error(huge, "truncated");
        expect_images_error(images_file(2, 5000, 3), "bad dimensions");
    }
    SECTION("corrupt or truncated gzip") {
        Bytes gz = gzip(good);
        Bytes truncated(gz.begin(), gz.begin() + static_cast<long>(gz.size() / 2));
        expect_images_error(truncated, "truncated gzip");
        Bytes corrupt = gz;
        for (std::size_t i = 12; i < corrupt.size(); ++i) corrupt[i] ^= 0x5a;
        expect_images_error(corrupt, "gzip");
    }
}

TEST_CASE("a data dir's labels outside 0-9 are rejected", "[idx]") {
    TempDir dir;
    dir.write("train-images-idx3-ubyte", images_file(3, 2, 2));
    const std::string labels = dir.write("train-labels-idx1-ubyte", labels_file({1, 10, 3}));
    auto r = load_split(dir.path.string(), "train");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains(labels) && Catch::Contains("label 10 at index 1"));
}

TEST_CASE("a split whose image and label counts differ is rejected", "[idx]") {
    TempDir dir;
    dir.write("t10k-images-idx3-ubyte", images_file(3, 2, 2));
    dir.write("t10k-labels-idx1-ubyte", labels_file({1, 2}));
    auto r = load_split(dir.path.string(), "t10k");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("2 labels") && Catch::Contains("3 images"));
    auto missing = load_split(dir.path.string(), "train");
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message, Catch::Contains("train-images-idx3-ubyte"));
}

}  // namespace psrun::worker
