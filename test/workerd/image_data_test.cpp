// Image decoding (JPEG through libjpeg-turbo, PNG through libpng in every colour type), fitting
// to the model's size (crop, pad, stretch), and image folders (class order, extensions,
// validation split).
#include <png.h>

#include <catch2/catch.hpp>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "test/workerd/data_files.h"
#include "workerd/data/image_decoder.h"
#include "workerd/data/image_encoder.h"
#include "workerd/data/image_folder.h"
#include "workerd/data/image_resize.h"

namespace psrun::worker {
namespace {

using test::Bytes;

// A w x h x c image whose pixel (x, y, k) is (x * 7 + y * 13 + k * 50) % 256.
Bytes pattern(int w, int h, int c) {
    Bytes out;
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x)
            for (int k = 0; k < c; ++k) out.push_back(static_cast<std::uint8_t>((x * 7 + y * 13 + k * 50) % 256));
    return out;
}

// A PNG written by libpng's simplified API in `format` (any PNG_FORMAT_*), from `pixels`.
Bytes write_png(int w, int h, png_uint_32 format, const void* pixels, const png_color* palette = nullptr,
                int colors = 0) {
    png_image png;
    std::memset(&png, 0, sizeof png);
    png.version = PNG_IMAGE_VERSION;
    png.width = static_cast<png_uint_32>(w);
    png.height = static_cast<png_uint_32>(h);
    png.format = format;
    png.colormap_entries = static_cast<png_uint_32>(colors);
    png_alloc_size_t size = 0;
    REQUIRE(png_image_write_to_memory(&png, nullptr, &size, 0, pixels, 0, palette));
    Bytes out(size);
    REQUIRE(png_image_write_to_memory(&png, out.data(), &size, 0, pixels, 0, palette));
    out.resize(size);
    return out;
}

Bytes decode(const Bytes& file, int c, int h, int w, ResizeMode mode = ResizeMode::kCrop,
             DecodedImage* info = nullptr) {
    ImageDecoder d;
    Bytes out(static_cast<std::size_t>(c * h * w));
    auto r = d.decode(file, {c, h, w, mode}, out, "img");
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r);
    if (info != nullptr) *info = *r;
    return out;
}

}  // namespace

TEST_CASE("resize: target-sized images are copied exactly; crop, pad and stretch plans", "[images]") {
    const Bytes hwc = pattern(5, 4, 3);
    Bytes out(60);
    std::vector<float> scratch;
    resize_to_chw({hwc.data(), 5, 4, 3}, 5, 4, ResizeMode::kPad, out, scratch);
    for (int k = 0; k < 3; ++k)
        for (int p = 0; p < 20; ++p)
            CHECK(out[static_cast<std::size_t>(k * 20 + p)] == hwc[static_cast<std::size_t>(p * 3 + k)]);

    // 100 x 50 onto 28 x 28: crop takes the centre 50 x 50, pad scales to 28 x 14 centred in y.
    const ResizePlan crop = plan_resize(100, 50, 28, 28, ResizeMode::kCrop);
    CHECK(crop.x0 == Approx(25));
    CHECK(crop.sw == Approx(50));
    CHECK(crop.y0 == Approx(0).margin(1e-9));
    CHECK(crop.sh == Approx(50));
    CHECK((crop.dx == 0 && crop.dw == 28 && crop.dh == 28));
    const ResizePlan pad = plan_resize(100, 50, 28, 28, ResizeMode::kPad);
    CHECK((pad.dw == 28 && pad.dh == 14 && pad.dx == 0 && pad.dy == 7 && pad.sw == 100 && pad.sh == 50));
    const ResizePlan stretch = plan_resize(100, 50, 28, 28, ResizeMode::kStretch);
    CHECK((stretch.dw == 28 && stretch.dh == 28 && stretch.sw == 100));

    // Constant images stay constant; a 1-pixel checkerboard halved averages to its mean.
    Bytes flat(64 * 64, 200), board(64 * 64);
    for (int y = 0; y < 64; ++y)
        for (int x = 0; x < 64; ++x) board[static_cast<std::size_t>(y * 64 + x)] = ((x + y) % 2) ? 255 : 0;
    Bytes small(32 * 32);
    resize_to_chw({flat.data(), 64, 64, 1}, 32, 32, ResizeMode::kStretch, small, scratch);
    CHECK(std::all_of(small.begin(), small.end(), [](std::uint8_t v) { return v == 200; }));
    resize_to_chw({board.data(), 64, 64, 1}, 32, 32, ResizeMode::kStretch, small, scratch);
    for (int y = 1; y < 31; ++y)  // the edges see a clipped filter
        for (int x = 1; x < 31; ++x) CHECK(int(small[static_cast<std::size_t>(y * 32 + x)]) == 128);
    // Pad: the borders are black, the image in the middle.
    Bytes wide(40 * 20, 255), padded(20 * 20);
    resize_to_chw({wide.data(), 40, 20, 1}, 20, 20, ResizeMode::kPad, padded, scratch);
    CHECK((padded[0] == 0 && padded[19] == 0 && padded[10 * 20 + 10] == 255 && padded[19 * 20] == 0));
    CHECK(padded[5 * 20 + 3] == 255);  // rows 5..14 hold the 20 x 10 image
}

TEST_CASE("JPEG: gray and RGB decode close to the original, colour to gray, DCT scaling, damage", "[images]") {
    const Bytes gray = pattern(28, 28, 1);
    auto jpeg = encode_jpeg(gray, 28, 28, 1, 100);
    REQUIRE(jpeg);
    CHECK(sniff_image(*jpeg) == ImageFormat::kJpeg);
    DecodedImage info;
    const Bytes out = decode(*jpeg, 1, 28, 28, ResizeMode::kCrop, &info);
    CHECK((info.format == ImageFormat::kJpeg && !info.converted && !info.resized && info.width == 28));
    int worst = 0;
    for (std::size_t i = 0; i < out.size(); ++i) worst = std::max(worst, std::abs(int(out[i]) - int(gray[i])));
    CHECK(worst <= 8);

    const Bytes rgb = pattern(16, 16, 3);
    auto color = encode_jpeg(rgb, 16, 16, 3, 95);
    REQUIRE(color);
    decode(*color, 1, 16, 16, ResizeMode::kCrop, &info);
    CHECK(info.converted);
    const Bytes back = decode(*color, 3, 16, 16);
    CHECK(std::abs(int(back[0]) - int(rgb[0])) <= 24);  // R of pixel (0, 0), through 4:2:0 chroma

    // A 512 x 256 photo for a 28 x 28 model: libjpeg-turbo decodes it at 1/8 (64 x 32), then crop.
    JpegDecoder jd;
    auto big = encode_jpeg(Bytes(512 * 256 * 3, 90), 512, 256, 3, 90);
    REQUIRE(big);
    Bytes hwc;
    auto scaled = jd.decode(*big, "big.jpg", 3, 28, 28, ResizeMode::kCrop, hwc);
    REQUIRE(scaled);
    CHECK((scaled->decoded_width == 64 && scaled->decoded_height == 32 && scaled->width == 512));
    const Bytes fitted = decode(*big, 3, 28, 28);
    CHECK((int(fitted[0]) >= 85 && int(fitted[0]) <= 95));

    Bytes cut(jpeg->begin(), jpeg->begin() + 20);
    ImageDecoder d;
    Bytes o(784);
    auto broken = d.decode(cut, {1, 28, 28, ResizeMode::kCrop}, o, "cut.jpg");
    REQUIRE_FALSE(broken);
    CHECK_THAT(broken.error().message, Catch::StartsWith("cut.jpg: unreadable JPEG"));
    auto junk = d.decode(Bytes{1, 2, 3, 4, 5}, {1, 28, 28, ResizeMode::kCrop}, o, "junk.bin");
    REQUIRE_FALSE(junk);
    CHECK_THAT(junk.error().message, Catch::Contains("junk.bin: not a JPEG, PNG or PGM image"));
}

TEST_CASE("PNG: gray exact, RGB, palette, 16-bit, alpha composited onto black", "[images]") {
    const Bytes gray = pattern(7, 5, 1);
    CHECK(decode(write_png(7, 5, PNG_FORMAT_GRAY, gray.data()), 1, 5, 7) == gray);
    const Bytes rgb = pattern(7, 5, 3);
    const Bytes chw = decode(write_png(7, 5, PNG_FORMAT_RGB, rgb.data()), 3, 5, 7);
    CHECK((chw[0] == rgb[0] && chw[35] == rgb[1] && chw[70] == rgb[2] && chw[34] == rgb[34 * 3]));
    DecodedImage info;
    decode(write_png(7, 5, PNG_FORMAT_RGB, rgb.data()), 1, 5, 7, ResizeMode::kCrop, &info);
    CHECK(info.converted);

    // Palette: indices into 2 colours (white, red).
    const png_color palette[2] = {{255, 255, 255}, {255, 0, 0}};
    const Bytes indices{0, 1, 1, 0};
    const Bytes pal = decode(write_png(2, 2, PNG_FORMAT_RGB_COLORMAP, indices.data(), palette, 2), 3, 2, 2);
    CHECK((pal[0] == 255 && pal[4 + 0] == 255 && pal[1] == 255 && pal[4 + 1] == 0 && pal[8 + 1] == 0));

    // 16-bit (linear) gray: the extremes stay 0 and 255.
    const std::vector<std::uint16_t> deep{0, 65535, 65535, 0};
    const Bytes d16 = decode(write_png(2, 2, PNG_FORMAT_LINEAR_Y, deep.data()), 1, 2, 2);
    CHECK(d16 == Bytes{0, 255, 255, 0});

    // Alpha: an opaque white pixel stays 255, a transparent white one becomes 0 (black).
    const Bytes rgba{255, 255, 255, 255, 255, 255, 255, 0};
    CHECK(decode(write_png(2, 1, PNG_FORMAT_RGBA, rgba.data()), 1, 1, 2) == Bytes{255, 0});

    Bytes damaged = write_png(7, 5, PNG_FORMAT_GRAY, gray.data());
    damaged.resize(damaged.size() - 20);
    ImageDecoder d;
    Bytes o(35);
    auto r = d.decode(damaged, {1, 5, 7, ResizeMode::kCrop}, o, "d.png");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::StartsWith("d.png: unreadable PNG"));
}

TEST_CASE("image folders: classes by sorted name, image files only, a stable validation split", "[images]") {
    test::DataDir dir;
    namespace fs = std::filesystem;
    const auto png = write_png(2, 2, PNG_FORMAT_GRAY, Bytes{1, 2, 3, 4}.data());
    for (const char* c : {"b", "B", "a"}) fs::create_directories(dir.path / "root" / c / "sub");
    dir.write("root/b/2.png", png);
    dir.write("root/b/1.PNG", png);
    dir.write("root/B/x.jpg", png);  // the content decides the format; the name only picks the file
    dir.write("root/a/sub/deep.png", png);
    dir.write("root/a/notes.txt", Bytes{1});
    auto f = scan_image_folder(dir.file("root"));
    REQUIRE(f);
    CHECK(f->classes == std::vector<std::string>{"B", "a", "b"});
    CHECK(f->labels == std::vector<std::int32_t>{0, 1, 2, 2});
    CHECK((f->files[1] == dir.file("root/a/sub/deep.png") && f->files[2] == dir.file("root/b/1.PNG")));
    CHECK(f->skipped_files == 1);

    fs::create_directories(dir.path / "root" / "empty");
    auto empty = scan_image_folder(dir.file("root"));
    REQUIRE_FALSE(empty);
    CHECK_THAT(empty.error().message, Catch::Contains("root/empty: class folder without images"));
    auto none = scan_image_folder(dir.file("root/a/notes.txt"));
    REQUIRE_FALSE(none);
    CHECK_THAT(none.error().message, Catch::Contains("not a directory"));

    // 1000 files in 2 classes: about 20% validation, the same split every time, disjoint.
    ImageFolder many{"/data", {"x", "y"}, {}, {}, 0};
    for (int i = 0; i < 1000; ++i) {
        many.files.push_back("/data/" + std::string(i % 2 ? "x" : "y") + "/" + std::to_string(i) + ".png");
        many.labels.push_back(i % 2);
    }
    ImageFolder train, val, train2, val2;
    REQUIRE(split_validation(many, 0.2, train, val));
    REQUIRE(split_validation(many, 0.2, train2, val2));
    CHECK((val.files == val2.files && train.files.size() + val.files.size() == 1000));
    CHECK((val.files.size() > 150 && val.files.size() < 250));
    for (const auto& v : val.files) CHECK(std::find(train.files.begin(), train.files.end(), v) == train.files.end());
    ImageFolder other{"/t", {"x", "z"}, {}, {}, 0};
    auto diff = check_same_classes(many, other);
    REQUIRE_FALSE(diff);
    CHECK_THAT(diff.error().message,
               Catch::Contains("/t: its classes (x, z) are not those of the training folder /data (x, y)"));
}

}  // namespace psrun::worker
