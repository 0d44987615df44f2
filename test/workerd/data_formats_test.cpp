// Float32 and rank-4 IDX, CIFAR-10/100 batches on generated files, formats chosen by content,
// gzip, and the errors of a split given as files.
#include <zlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "test/workerd/data_files.h"
#include "workerd/data/cifar_reader.h"
#include "workerd/data/idx_reader.h"
#include "workerd/data/split_files.h"

namespace psrun::worker::data_formats_test {
namespace {

using test::Bytes;

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

// `records` CIFAR records: labels from `label(r)` (CIFAR-100: coarse = fine / 5), pixel k of
// record r = (r * 7 + k) % 256.
Bytes cifar_file(std::size_t records, bool cifar100, int (*label)(std::size_t)) {
    Bytes out;
    for (std::size_t r = 0; r < records; ++r) {
        if (cifar100) out.push_back(static_cast<std::uint8_t>(label(r) / 5));
        out.push_back(static_cast<std::uint8_t>(label(r)));
        for (std::size_t k = 0; k < 3072; ++k) out.push_back(static_cast<std::uint8_t>((r * 7 + k) % 256));
    }
    return out;
}

void expect_split_error(const SplitFiles& files, const std::string& file, const std::string& problem) {
    auto r = load_split_files("train", files, ImageLayout::kAuto);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.error().message, Catch::Contains(file) && Catch::Contains(problem));
}

}  // namespace

TEST_CASE("IDX float32 rank-4 images (N x C x H x W, big-endian)", "[idx]") {
    const std::vector<float> v{0.0f, 0.5f, -1.25f, 3.0f, 1e-6f, 100.0f, 0.125f, -0.0f};
    auto a = parse_idx_images(test::idx(kIdxFloat, {2, 2, 1, 2}, test::floats(v, true)), "f.idx");
    REQUIRE(a);
    CHECK((a->type == PixelType::kFloat32 && a->count == 2 && a->channels == 2 && a->height == 1 && a->width == 2));
    CHECK(a->f32 == v);
    auto u8 = parse_idx_images(test::idx(kIdxUbyte, {1, 3, 2, 2}, test::counting(12)), "u.idx");
    REQUIRE(u8);
    CHECK((u8->channels == 3 && u8->u8 == test::counting(12)));
    auto f3 = parse_idx_images(test::idx(kIdxFloat, {1, 2, 2}, test::floats({1, 2, 3, 4}, true)), "f3.idx");
    REQUIRE(f3);
    CHECK((f3->channels == 1 && f3->f32 == std::vector<float>{1, 2, 3, 4}));

    const float inf = std::numeric_limits<float>::infinity();
    auto bad = parse_idx_images(test::idx(kIdxFloat, {1, 1, 2}, test::floats({1, inf}, true)), "inf.idx");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("inf.idx") && Catch::Contains("not finite"));
    auto overflow = parse_idx_images(test::idx(kIdxFloat, {0xffffffff, 4096, 4096, 4096}, Bytes(16)), "o.idx");
    REQUIRE_FALSE(overflow);
    CHECK_THAT(overflow.error().message, Catch::Contains("o.idx") && Catch::Contains("overflows"));
}

TEST_CASE("CIFAR-10 and CIFAR-100 batches on generated files", "[cifar]") {
    test::DataDir dir;
    const std::string b1 =
        dir.write("data_batch_1.bin", cifar_file(3, false, [](std::size_t r) { return int(r * 4 % 10); }));
    const std::string b2 =
        dir.write("data_batch_2.bin.gz", gzip(cifar_file(2, false, [](std::size_t r) { return int(9 - r); })));
    auto c10 = load_split_files("train", {"cifar10:" + b1 + "," + b2, ""}, ImageLayout::kAuto);
    REQUIRE(c10);
    CHECK((c10->size() == 5 && c10->images.shape() == "3x32x32" && c10->images.type == PixelType::kUint8));
    CHECK(c10->labels == std::vector<std::int32_t>{0, 4, 8, 9, 8});
    // Pixel k of record r is (r*7 + k) % 256, kept in the file's plane order (R, G, B planes =
    // NCHW).
    CHECK(c10->images.u8[0] == 0);
    CHECK(c10->images.u8[2 * 3072 + 1024 + 33] == (2 * 7 + 1024 + 33) % 256);  // record 2, green, (1, 1)
    CHECK(c10->images.u8[4 * 3072 + 3071] == (1 * 7 + 3071) % 256);            // file 2's record 1, last byte

    const std::string c100_file =
        dir.write("train.bin", cifar_file(4, true, [](std::size_t r) { return int(r * 33 % 100); }));
    auto fine = load_split_files("test", {"cifar100:" + c100_file, ""}, ImageLayout::kAuto);
    REQUIRE(fine);
    CHECK(fine->labels == std::vector<std::int32_t>{0, 33, 66, 99});
    CHECK(fine->images.u8[3 * 3072 + 5] == (3 * 7 + 5) % 256);
    auto coarse = load_split_files("test", {"cifar100-coarse:" + c100_file, ""}, ImageLayout::kAuto);
    REQUIRE(coarse);
    CHECK(coarse->labels == std::vector<std::int32_t>{0, 6, 13, 19});
}

TEST_CASE("CIFAR errors name the file and the record", "[cifar]") {
    test::DataDir dir;
    const Bytes good = cifar_file(2, false, [](std::size_t) { return 1; });
    const std::string cut = dir.write("cut.bin", Bytes(good.begin(), good.end() - 1));
    expect_split_error({"cifar10:" + cut, ""}, cut, "not a whole number of 3073-byte CIFAR-10 records");
    Bytes longer = good;
    longer.push_back(0);
    const std::string trailing = dir.write("long.bin", longer);
    expect_split_error({"cifar10:" + trailing, ""}, trailing, "not a whole number");
    // A CIFAR-10 file read as CIFAR-100: 2 x 3073 bytes is not a multiple of 3074.
    const std::string c10 = dir.write("c10.bin", good);
    expect_split_error({"cifar100:" + c10, ""}, c10, "CIFAR-10 records are 3073 bytes");
    Bytes bad_label = good;
    bad_label[3073] = 10;
    const std::string bl = dir.write("label.bin", bad_label);
    expect_split_error({"cifar10:" + bl, ""}, bl, "record 1: label 10 is out of range 0-9");
    Bytes bad_coarse = cifar_file(1, true, [](std::size_t) { return 3; });
    bad_coarse[0] = 20;
    const std::string bc = dir.write("coarse.bin", bad_coarse);
    expect_split_error({"cifar100:" + bc, ""}, bc, "coarse label 20");
    const std::string empty = dir.write("empty.bin", {});
    expect_split_error({"cifar10:" + empty, ""}, empty, "is empty");
    expect_split_error({"cifar10:" + dir.file("none.bin"), ""}, dir.file("none.bin"), "cannot open");
    expect_split_error({"cifar10:" + c10, dir.file("labels")}, "--train-labels", "CIFAR batches hold their labels");
}

TEST_CASE("split files: labels may be left out only for a model that reads none", "[data]") {
    test::DataDir dir;
    const std::string images = dir.write("x.npy", test::npy("|u1", {3, 2, 2}, test::counting(12)));
    ModelInput model{"m", 1, 2, 2, 10};
    auto refused = load_split_files("train", {images, ""}, ImageLayout::kAuto, &model);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("needs --train-labels"));
    model.labels_needed = false;  // a loss in the graph whose targets are a column
    model.classes = std::numeric_limits<int>::max();
    auto split = load_split_files("train", {images, ""}, ImageLayout::kAuto, &model);
    REQUIRE(split);
    CHECK(split->images.count == 3);
    CHECK(split->labels == std::vector<std::int32_t>(3, 0));
}

TEST_CASE("split files: the format is chosen by content, not by name", "[data]") {
    test::DataDir dir;
    // A .npy file named like IDX and an IDX file named .npy, one of them gzip-compressed.
    const std::string images = dir.write("images.idx", gzip(test::npy("|u1", {2, 2, 2}, test::counting(8))));
    const std::string labels = dir.write("labels.npy", test::idx(kIdxUbyte, {2}, Bytes{4, 2}));
    auto split = load_split_files("train", {images, labels}, ImageLayout::kAuto);
    REQUIRE(split);
    CHECK(split->images.u8 == test::counting(8));
    CHECK(split->labels == std::vector<std::int32_t>{4, 2});

    SECTION("neither format") {
        const std::string text = dir.write("x.csv", Bytes{'1', ',', '2', '\n'});
        expect_split_error({text, labels}, text, "bad magic: neither a NumPy .npy file");
        expect_split_error({images, text}, text, "bad magic");
    }
    SECTION("labels where images belong and vice versa") {
        expect_split_error({labels, labels}, labels, "bad magic number");
        expect_split_error({images, images}, images, "shape (N,) or (N, 1)");
    }
    SECTION("label count differs from image count") {
        const std::string three = dir.write("three.npy", test::npy("<i8", {3}, test::ints({1, 2, 3}, 8)));
        expect_split_error({images, three}, "train labels " + three,
                           "holds 3 labels but train images " + images + " holds 2 images");
    }
    SECTION("a missing file is the option's error (exit 2), naming it") {
        expect_split_error({dir.file("nope.npy"), labels}, dir.file("nope.npy"), "cannot open");
    }
    SECTION("a directory instead of a file") {
        expect_split_error({dir.path.string(), labels}, dir.path.string(), "is a directory");
    }
    SECTION("images without labels") { expect_split_error({images, ""}, "--train-labels", "needs"); }
}

}  // namespace psrun::worker::data_formats_test
