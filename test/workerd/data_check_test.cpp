// The data checked against the model (shape, classes, normalization pairs), --normalize, what
// fill_batch makes of uint8 and float32 pixels, load_datasets' option errors, and .npy files
// written by real NumPy.
#include <catch2/catch.hpp>
#include <cstdlib>

#include "common/result.h"
#include "test/workerd/data_files.h"
#include "workerd/data/sampler.h"
#include "workerd/data/split_files.h"
#include "workerd/datasets.h"

namespace psrun::worker {
namespace {

const ModelInput kMnistDeep{"mnist_deep", 1, 28, 28, 10};

LabeledImages blank(int channels, int height, int width, std::vector<std::int32_t> labels) {
    LabeledImages d;
    d.images.count = labels.size();
    d.images.channels = channels;
    d.images.height = height;
    d.images.width = width;
    d.images.u8.resize(d.images.count * d.images.example_size());
    d.labels = std::move(labels);
    return d;
}

std::string check_error(const LabeledImages& d) {
    auto r = check_fits_model(d, {"train images /d/x.npy", "train labels /d/y.npy"}, kMnistDeep);
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    return r.error().message;
}

}  // namespace

TEST_CASE("check_fits_model: shape, classes, counts and normalization pairs", "[data]") {
    CHECK(check_fits_model(blank(1, 28, 28, {0, 9}), {"a", "b"}, kMnistDeep));
    CHECK(check_error(blank(3, 32, 32, {1})) ==
          "train images /d/x.npy: 3x32x32 per example, the model mnist_deep takes 1x28x28");
    CHECK_THAT(check_error(blank(1, 28, 27, {1})), Catch::Contains("1x28x27 per example"));
    CHECK(check_error(blank(1, 28, 28, {1, 10})) ==
          "train labels /d/y.npy: label 10 at index 1 is out of range 0-9 (the model mnist_deep "
          "has 10 classes)");
    CHECK_THAT(check_error(blank(1, 28, 28, {-1})), Catch::Contains("label -1 at index 0"));
    LabeledImages short_labels = blank(1, 28, 28, {1, 2});
    short_labels.labels.pop_back();
    CHECK_THAT(check_error(short_labels),
               Catch::Contains("/d/y.npy: holds 1 labels but train images /d/x.npy holds 2"));
    LabeledImages pairs = blank(1, 28, 28, {1});
    pairs.normalization = *parse_normalization("0.1,0.2,0.3:1,1,1");
    CHECK_THAT(check_error(pairs),
               Catch::Contains("--normalize gives 3 mean/std pairs") && Catch::Contains("1 channels"));
    // A general engine's model: 3x32x32, 100 classes.
    CHECK(check_fits_model(blank(3, 32, 32, {99}), {"a", "b"}, {"resnet", 3, 32, 32, 100}));
}

TEST_CASE("--normalize syntax", "[data]") {
    auto one = parse_normalization("0.1307,0.3081");
    REQUIRE(one);
    CHECK((one->mean == std::vector<float>{0.1307f} && one->std == std::vector<float>{0.3081f}));
    auto per = parse_normalization("0.49,0.48,0.45:0.25,0.24,0.26");
    REQUIRE(per);
    CHECK((per->mean.size() == 3 && per->std[2] == 0.26f));
    CHECK(parse_normalization("")->empty());
    for (const char* bad : {"0.5", "0.5,0.2,0.1", "a,b", "0.5,0", "0.5,-1", "1,2:3", "0.5,nan", ":", "1,:2,"}) {
        INFO(bad);
        auto r = parse_normalization(bad);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::StartsWith("--normalize '"));
    }
}

TEST_CASE("fill_batch: MNIST bytes bit-identical, float32 copied, normalization per channel", "[data]") {
    LabeledImages u8 = blank(1, 16, 16, {3});
    for (std::size_t i = 0; i < 256; ++i) u8.images.u8[i] = static_cast<std::uint8_t>(i);
    std::vector<float> out(256);
    std::vector<std::int32_t> labels(1);
    const std::vector<std::uint32_t> idx0{0};
    fill_batch(u8, idx0, out, labels);
    for (std::size_t i = 0; i < 256; ++i) REQUIRE(out[i] == static_cast<float>(i) * (1.0f / 255.0f));
    CHECK(labels[0] == 3);

    LabeledImages rgb = blank(3, 1, 2, {7, 8});
    rgb.images.u8 = {0, 255, 51, 102, 255, 0, /* example 1 */ 10, 20, 30, 40, 50, 60};
    rgb.normalization = *parse_normalization("0.5,0.25,0:0.5,0.25,2");
    std::vector<float> batch(6);
    std::vector<std::int32_t> two(1);
    const std::vector<std::uint32_t> idx1{0};
    fill_batch(rgb, idx1, batch, two);
    const std::vector<float> want{-1.0f, 1.0f, (0.2f - 0.25f) / 0.25f, (0.4f - 0.25f) / 0.25f, 0.5f, 0.0f};
    for (std::size_t i = 0; i < 6; ++i) CHECK(batch[i] == Approx(want[i]).margin(1e-6));
    CHECK(two[0] == 7);

    LabeledImages f = blank(1, 1, 3, {1, 2});
    f.images.type = PixelType::kFloat32;
    f.images.u8.clear();
    f.images.f32 = {0.5f, -2.0f, 7.0f, 1.0f, 2.0f, 3.0f};
    std::vector<float> fb(3);
    const std::vector<std::uint32_t> idx2{1};
    fill_batch(f, idx2, fb, two);
    CHECK((fb == std::vector<float>{1.0f, 2.0f, 3.0f} && two[0] == 2));
    f.normalization = *parse_normalization("1,2");
    const std::vector<std::uint32_t> idx3{0};
    fill_batch(f, idx3, fb, two);
    CHECK(fb == std::vector<float>{-0.25f, -1.5f, 3.0f});
}

TEST_CASE("load_datasets: option errors are usage errors, data errors name the file", "[data]") {
    test::DataDir dir;
    const std::string x = dir.write("x.npy", test::npy("|u1", {2, 32, 32, 3}, test::Bytes(6144)));
    const std::string y = dir.write("y.npy", test::npy("|u1", {2}, test::Bytes{1, 2}));
    TrainOptions o;
    o.train_images = x;
    o.train_labels = y;
    CHECK_THROWS_WITH(load_datasets(o, kMnistDeep), Catch::Contains("give both --train-images and --test-images"));
    o.test_images = x;
    o.test_labels = y;
    o.data_dir = dir.path.string();
    CHECK_THROWS_WITH(load_datasets(o, kMnistDeep), Catch::Contains("exclude each other"));
    o.data_dir.clear();
    o.normalize = "1";
    CHECK_THROWS_WITH(load_datasets(o, kMnistDeep), Catch::Contains("--normalize"));
    o.normalize.clear();
    auto r = load_datasets(o, kMnistDeep);
    REQUIRE_FALSE(r);
    CHECK(r.error().message == "train images " + x + ": 3x32x32 per example, the model mnist_deep takes 1x28x28");
    CHECK(data_error_exit_code(r.error()) == kExitUsage);
    auto fits = load_datasets(o, {"cnn", 3, 32, 32, 10});
    REQUIRE(fits);
    CHECK((fits->name == "files" && fits->train.size() == 2 && fits->test.labels[1] == 2));
    o.image_layout = "hwc";
    CHECK_THROWS_WITH(load_datasets(o, kMnistDeep), Catch::Contains("--image-layout"));

    TrainOptions missing;
    missing.data_dir = dir.file("empty");
    auto m = load_datasets(missing, kMnistDeep);
    REQUIRE_FALSE(m);
    CHECK_THAT(m.error().message, Catch::Contains("psrun data fetch"));
    CHECK(data_error_exit_code(m.error()) == kExitFailure);
}

TEST_CASE(".npy files written by NumPy itself", "[data][numpy]") {
    test::DataDir dir;
    const std::string d = dir.path.string();
    // Every dtype and layout the reader takes, with values that locate each element.
    const std::string script =
        "import numpy as np, sys; d = sys.argv[1]\n"
        "x = (np.arange(2*6*5*3) % 251).astype(np.uint8).reshape(2, 6, 5, 3)\n"
        "np.save(d + '/nhwc_u8.npy', x)\n"
        "np.save(d + '/nchw_f32.npy', np.ascontiguousarray(x.transpose(0, 3, 1, "
        "2)).astype(np.float32) / 4)\n"
        "np.save(d + '/nhw_be.npy', x[:, :, :, 0].astype('>f4'))\n"
        "np.save(d + '/y_i64.npy', np.array([9, 0], dtype=np.int64))\n"
        "np.save(d + '/y_i4be.npy', np.array([3, 7], dtype='>i4'))\n"
        "np.save(d + '/y_u8.npy', np.array([[1], [2]], dtype=np.uint8))\n"
        "np.save(d + '/fortran.npy', np.asfortranarray(x[:, :, :, 0]))\n";
    const std::string cmd = "/usr/bin/python3 -c \"$PSRUN_NPY_SCRIPT\" " + d;
    REQUIRE(setenv("PSRUN_NPY_SCRIPT", script.c_str(), 1) == 0);
    INFO("needs python3-numpy (jobs/setup.sh installs it)");
    REQUIRE(std::system(cmd.c_str()) == 0);

    auto nhwc = read_images_file(d + "/nhwc_u8.npy", ImageLayout::kAuto);
    REQUIRE(nhwc);
    CHECK((nhwc->channels == 3 && nhwc->height == 6 && nhwc->width == 5 && nhwc->type == PixelType::kUint8));
    // x[n, h, w, c] = (n*90 + h*15 + w*3 + c) % 251 lands at [n][c][h][w].
    CHECK(nhwc->u8[1 * 90 + 2 * 30 + 3 * 5 + 4] == (90 + 3 * 15 + 4 * 3 + 2) % 251);
    auto nchw = read_images_file(d + "/nchw_f32.npy", ImageLayout::kAuto);
    REQUIRE(nchw);
    CHECK(nchw->type == PixelType::kFloat32);
    for (std::size_t i = 0; i < nchw->f32.size(); ++i) REQUIRE(nchw->f32[i] == static_cast<float>(nhwc->u8[i]) / 4);
    auto be = read_images_file(d + "/nhw_be.npy", ImageLayout::kAuto);
    REQUIRE(be);
    CHECK((be->channels == 1 && be->f32[1 * 30 + 2 * 5 + 1] == static_cast<float>((90 + 30 + 3) % 251)));
    CHECK(*read_labels_file(d + "/y_i64.npy") == std::vector<std::int32_t>{9, 0});
    CHECK(*read_labels_file(d + "/y_i4be.npy") == std::vector<std::int32_t>{3, 7});
    CHECK(*read_labels_file(d + "/y_u8.npy") == std::vector<std::int32_t>{1, 2});
    auto fortran = read_images_file(d + "/fortran.npy", ImageLayout::kAuto);
    REQUIRE_FALSE(fortran);
    CHECK_THAT(fortran.error().message, Catch::Contains("fortran.npy") && Catch::Contains("fortran_order is True"));
}

}  // namespace psrun::worker
