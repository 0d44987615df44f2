// The .npy reader: every image dtype and layout (NHWC moved to NCHW value by value), every label
// dtype in both byte orders, format versions, and one case per kind of bad file.
#include "workerd/data/npy_reader.h"
#include "workerd/data/npy_values.h"

#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "test/workerd/data_files.h"

namespace psrun::worker::npy_reader_test {
namespace {

using test::Bytes;

// The error for `bytes` parsed as images (labels) must name the file and contain `problem`.
void expect_images_error(const Bytes& bytes, const std::string& problem, ImageLayout layout = ImageLayout::kAuto) {
    auto r = parse_npy_images(bytes, "/d/x.npy", layout);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.error().message, Catch::StartsWith("/d/x.npy: ") && Catch::Contains(problem));
}

void expect_labels_error(const Bytes& bytes, const std::string& problem) {
    auto r = parse_npy_labels(bytes, "/d/y.npy");
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::StartsWith("/d/y.npy: ") && Catch::Contains(problem));
}

}  // namespace

TEST_CASE("npy uint8 images: N x H x W and N x C x H x W are read as stored", "[npy]") {
    auto nhw = parse_npy_images(test::npy("|u1", {2, 3, 4}, test::counting(24)), "a.npy");
    REQUIRE(nhw);
    CHECK(nhw->type == PixelType::kUint8);
    CHECK((nhw->count == 2 && nhw->channels == 1 && nhw->height == 3 && nhw->width == 4));
    CHECK(nhw->u8 == test::counting(24));
    CHECK(nhw->f32.empty());

    auto nchw = parse_npy_images(test::npy("|u1", {2, 3, 5, 6}, test::counting(180)), "a.npy");
    REQUIRE(nchw);
    CHECK((nchw->channels == 3 && nchw->height == 5 && nchw->width == 6 && nchw->shape() == "3x5x6"));
    CHECK(nchw->u8 == test::counting(180));
}

TEST_CASE("npy N x H x W x C images are transposed to N x C x H x W", "[npy]") {
    // value(n, h, w, c) = n*90 + h*15 + w*3 + c: every position distinct.
    const std::size_t n_ = 2, h_ = 6, w_ = 5, c_ = 3;
    Bytes nhwc;
    for (std::size_t n = 0; n < n_; ++n)
        for (std::size_t h = 0; h < h_; ++h)
            for (std::size_t w = 0; w < w_; ++w)
                for (std::size_t c = 0; c < c_; ++c)
                    nhwc.push_back(static_cast<std::uint8_t>(n * 90 + h * 15 + w * 3 + c));
    auto a = parse_npy_images(test::npy("|u1", {n_, h_, w_, c_}, nhwc), "a.npy");
    REQUIRE(a);
    CHECK((a->channels == 3 && a->height == 6 && a->width == 5));
    auto at = [&](std::size_t n, std::size_t c, std::size_t h, std::size_t w) {
        return a->u8[n * 90 + c * 30 + h * 5 + w];
    };
    CHECK(at(0, 0, 0, 0) == 0);
    CHECK(at(0, 2, 0, 0) == 2);            // channel 2 of pixel (0, 0)
    CHECK(at(0, 1, 5, 4) == 75 + 12 + 1);  // last pixel of image 0, green
    CHECK(at(1, 2, 2, 1) == 90 + 30 + 3 + 2);
    for (std::size_t n = 0; n < n_; ++n)
        for (std::size_t c = 0; c < c_; ++c)
            for (std::size_t h = 0; h < h_; ++h)
                for (std::size_t w = 0; w < w_; ++w) REQUIRE(at(n, c, h, w) == n * 90 + h * 15 + w * 3 + c);

    // Float32, big-endian, N x H x W x 1 by an explicit layout.
    auto f = parse_npy_images(test::npy(">f4", {1, 2, 2, 1}, test::floats({0.5f, -1.0f, 2.25f, 3.0f}, true)), "f.npy",
                              ImageLayout::kNhwc);
    REQUIRE(f);
    CHECK((f->type == PixelType::kFloat32 && f->channels == 1 && f->height == 2 && f->width == 2));
    CHECK(f->f32 == std::vector<float>{0.5f, -1.0f, 2.25f, 3.0f});
    CHECK(f->u8.empty());
}

TEST_CASE("npy float32 images in either byte order, header versions 1 to 3", "[npy]") {
    const std::vector<float> v{0.0f, 0.25f, -3.5f, 1e-3f, 7.0f, 1.0f};
    for (bool big : {false, true}) {
        for (int major : {1, 2, 3}) {
            auto a = parse_npy_images(test::npy(big ? ">f4" : "<f4", {1, 1, 2, 3}, test::floats(v, big), false, major),
                                      "a.npy", ImageLayout::kNchw);
            REQUIRE(a);
            CHECK(a->f32 == v);
        }
    }
}

TEST_CASE("npy labels: uint8, int32 and int64 in either byte order, (N,) or (N, 1)", "[npy]") {
    const std::vector<std::int32_t> want{3, 0, 9, 7};
    CHECK(*parse_npy_labels(test::npy("|u1", {4}, Bytes{3, 0, 9, 7}), "y") == want);
    for (bool big : {false, true}) {
        CHECK(*parse_npy_labels(test::npy(big ? ">i4" : "<i4", {4}, test::ints({3, 0, 9, 7}, 4, big)), "y") == want);
        CHECK(*parse_npy_labels(test::npy(big ? ">i8" : "<i8", {4, 1}, test::ints({3, 0, 9, 7}, 8, big)), "y") == want);
    }
    // Negative labels are read (and refused later, against the model's classes).
    CHECK(*parse_npy_labels(test::npy("<i8", {1}, test::ints({-2}, 8)), "y") == std::vector<std::int32_t>{-2});
}

TEST_CASE("npy reader rejects each kind of bad file with the file name", "[npy]") {
    const Bytes good_data = test::counting(12);
    SECTION("bad magic, short file, unknown version") {
        expect_images_error(test::counting(40), "bad magic");
        expect_images_error(Bytes{0x93, 'N', 'U', 'M', 'P', 'Y', 1}, "too short");
        Bytes v9 = test::npy("|u1", {1, 3, 4}, good_data);
        v9[6] = 9;
        expect_images_error(v9, "version 9");
    }
    SECTION("fortran_order True is refused") {
        expect_images_error(test::npy("|u1", {1, 3, 4}, good_data, true), "fortran_order is True");
        expect_labels_error(test::npy("<i8", {1}, test::ints({1}, 8), true), "fortran_order is True");
    }
    SECTION("dtypes other than uint8/float32 images and uint8/int32/int64 labels") {
        expect_images_error(test::npy("<f8", {1, 3, 4}, Bytes(96)), "dtype '<f8'");
        expect_images_error(test::npy("<i4", {1, 3, 4}, Bytes(48)), "not supported for images");
        expect_labels_error(test::npy("<f4", {1}, Bytes(4)), "not supported for labels");
        expect_labels_error(test::npy("<u2", {1}, Bytes(2)), "dtype '<u2'");
        expect_images_error(
            test::npy("", {}, {}, false, 1, "{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,), }"),
            "structured");
    }
    SECTION("malformed or truncated header") {
        expect_images_error(test::npy("", {}, {}, false, 1, "{'descr': '|u1', 'shape': (1, 2, 2), }"), "lacks");
        expect_images_error(
            test::npy("", {}, {}, false, 1, "{'descr': '|u1', 'fortran_order': False, 'shape': (1, x), }"),
            "malformed 'shape'");
        expect_images_error(test::npy("", {}, {}, false, 1, "['descr']"), "not a Python dict");
        Bytes cut = test::npy("|u1", {1, 3, 4}, {});
        cut.resize(40);
        expect_images_error(cut, "truncated .npy header");
    }
    SECTION("wrong rank or shape") {
        expect_images_error(test::npy("|u1", {12}, good_data), "rank 1");
        expect_images_error(test::npy("|u1", {1, 2, 3, 2, 1}, good_data), "rank 5");
        expect_labels_error(test::npy("|u1", {2, 2}, Bytes(4)), "shape (N,) or (N, 1)");
        expect_images_error(test::npy("|u1", {0, 3, 4}, {}), "a dimension is 0");
    }
    SECTION("data shorter or longer than the shape") {
        expect_images_error(test::npy("|u1", {2, 3, 4}, good_data), "truncated");
        Bytes longer = good_data;
        longer.push_back(1);
        expect_images_error(test::npy("|u1", {1, 3, 4}, longer), "1 trailing bytes");
        expect_labels_error(test::npy("<i8", {3}, test::ints({1, 2}, 8)), "truncated");
    }
    SECTION("absurd dimensions: refused before allocating, without overflow") {
        expect_images_error(test::npy("|u1", {1, 100000, 4}, Bytes(16)), "bad dimensions");
        expect_images_error(test::npy("<f4", {std::uint64_t{1} << 60, 8, 8}, Bytes(16)), "bad dimensions");
        expect_images_error(test::npy("<f4", {0xffffffffULL, 4096, 4096, 4096}, Bytes(16)), "overflows",
                            ImageLayout::kNchw);
        expect_labels_error(test::npy("<i8", {std::uint64_t{1} << 62}, Bytes(8)), "bad dimensions");
        expect_images_error(test::npy("", {}, {}, false, 1,
                                      "{'descr': '|u1', 'fortran_order': False, 'shape': "
                                      "(99999999999999999999999, 2, 2), }"),
                            "malformed 'shape'");
    }
    SECTION("ambiguous N x 4 x 4 x 3: neither axis is clearly the channels") {
        expect_images_error(test::npy("|u1", {1, 4, 4, 3}, Bytes(48)), "--image-layout");
        expect_images_error(test::npy("|u1", {1, 8, 8, 8}, Bytes(512)), "--image-layout");
        auto forced = parse_npy_images(test::npy("|u1", {1, 4, 4, 3}, Bytes(48)), "a", ImageLayout::kNhwc);
        REQUIRE(forced);
        CHECK(forced->channels == 3);
    }
    SECTION("values that are not finite, labels that do not fit int32") {
        const float nan = std::numeric_limits<float>::quiet_NaN();
        expect_images_error(test::npy("<f4", {1, 1, 2}, test::floats({0.0f, nan})), "index 1 is not finite");
        expect_labels_error(test::npy("<i8", {2}, test::ints({1, std::int64_t{1} << 40}, 8)), "does not fit int32");
    }
}

TEST_CASE("npy images: the model's dims decide the layout where only one fits", "[npy]") {
    // 8 x 6 x 6: neither axis 1 nor axis 3 is <= 4, so the size rule cannot tell.
    const ImageDims model{8, 6, 6};
    std::vector<std::uint8_t> values(2 * 8 * 6 * 6);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<std::uint8_t>(i);
    expect_images_error(test::npy("|u1", {2, 8, 6, 6}, values), "--image-layout");
    auto nchw = parse_npy_images(test::npy("|u1", {2, 8, 6, 6}, values), "a", ImageLayout::kAuto, &model);
    REQUIRE(nchw);
    CHECK((nchw->channels == 8 && nchw->height == 6 && nchw->width == 6));
    CHECK(nchw->u8 == values);  // as stored
    auto nhwc = parse_npy_images(test::npy("|u1", {2, 6, 6, 8}, values), "a", ImageLayout::kAuto, &model);
    REQUIRE(nhwc);
    CHECK((nhwc->channels == 8 && nhwc->height == 6 && nhwc->width == 6));
    CHECK(nhwc->u8[1] == values[8]);  // channel 0 of pixel (0, 1)
    // A 32 x 4 x 4 model: axis 3 is <= 4, which the size rule reads as channels; the model says
    // N x C x H x W.
    const ImageDims frames{32, 4, 4};
    auto stacked = parse_npy_images(test::npy("|u1", {1, 32, 4, 4}, Bytes(512)), "a", ImageLayout::kAuto, &frames);
    REQUIRE(stacked);
    CHECK(stacked->channels == 32);
    // Both fit (4 x 4 x 4) or neither: the size rule as without a model; a given layout stays.
    const ImageDims cube{4, 4, 4};
    CHECK(resolve_image_layout({1, 4, 4, 4}, ImageLayout::kAuto, &cube) == ImageLayout::kAuto);
    CHECK(resolve_image_layout({1, 5, 4, 4}, ImageLayout::kAuto, &cube) == ImageLayout::kAuto);
    CHECK(resolve_image_layout({1, 4, 4, 8}, ImageLayout::kNchw, &model) == ImageLayout::kNchw);
    CHECK(resolve_image_layout({1, 8, 6, 6}, ImageLayout::kAuto, nullptr) == ImageLayout::kAuto);
}

TEST_CASE("--image-layout values", "[npy]") {
    CHECK(*parse_image_layout("nhwc") == ImageLayout::kNhwc);
    CHECK(*parse_image_layout("nchw") == ImageLayout::kNchw);
    CHECK(*parse_image_layout("auto") == ImageLayout::kAuto);
    CHECK_FALSE(parse_image_layout("NHWC"));
}

TEST_CASE("npy raw ids: exact 64-bit values of any integer dtype; floats and bools refused", "[npy]") {
    const auto raw_ids = [](const Bytes& bytes) -> Result<std::vector<std::uint64_t>> {
        auto h = parse_npy_header(bytes, "/d/ids.npy");
        if (!h) return tl::unexpected(h.error());
        return npy_as_raw_ids(bytes, *h, "/d/ids.npy");
    };
    // A negative int64 hash keeps its bits; values past 2^53 and 2^63 exactly; narrower signed
    // dtypes sign-extend, unsigned ones do not.
    const std::int64_t big = std::int64_t{0x7FFFFFFFFFFFFFF1};
    for (bool be : {false, true}) {
        auto ids = raw_ids(test::npy(be ? ">i8" : "<i8", {2, 2}, test::ints({-5, big, 1, 0}, 8, be)));
        REQUIRE(ids);
        CHECK(*ids == std::vector<std::uint64_t>{0xFFFFFFFFFFFFFFFBull, 0x7FFFFFFFFFFFFFF1ull, 1, 0});
    }
    CHECK(*raw_ids(test::npy("<u8", {1}, test::ints({-1}, 8))) == std::vector<std::uint64_t>{0xFFFFFFFFFFFFFFFFull});
    CHECK(*raw_ids(test::npy("<i2", {1}, test::ints({-2}, 2))) == std::vector<std::uint64_t>{0xFFFFFFFFFFFFFFFEull});
    CHECK(*raw_ids(test::npy("<u2", {1}, test::ints({65535}, 2))) == std::vector<std::uint64_t>{65535});
    for (const auto& [descr, data] : {std::pair<std::string, Bytes>{"<f4", test::floats({1.0f})}, {"|b1", Bytes{1}}}) {
        auto bad = raw_ids(test::npy(descr, {1}, data));
        REQUIRE_FALSE(bad);
        CHECK_THAT(bad.error().message,
                   Catch::StartsWith("/d/ids.npy: ") && Catch::Contains("for raw ids (--raw-ids)"));
    }
    auto short_file = raw_ids(test::npy("<i8", {3}, test::ints({1, 2}, 8)));
    CHECK_FALSE(short_file);
}

}  // namespace psrun::worker::npy_reader_test
