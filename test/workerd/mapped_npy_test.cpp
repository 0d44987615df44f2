// Memory-mapped .npy files give exactly the batches the in-memory path gives (uint8 NHWC and
// NCHW images, their layout decided by the model's dims where the size rule cannot, float32
// features), and refuse what cannot be mapped.
#include <zlib.h>

#include <catch2/catch.hpp>

#include "test/workerd/data_files.h"
#include "workerd/data/mapped_npy.h"
#include "workerd/data/memory_source.h"
#include "workerd/data/npy_reader.h"
#include "workerd/data/split_files.h"

namespace psrun::worker {
namespace {

using test::Bytes;

// The batches `a` and `b` give over `steps` steps of `batch` examples, compared value by value.
void same_batches(BatchSource& a, BatchSource& b, std::size_t batch, std::size_t values, int steps) {
    std::vector<float> xa(batch * values), xb(batch * values);
    std::vector<std::int32_t> ya(batch), yb(batch);
    for (int s = 0; s < steps; ++s) {
        BatchView va{xa, {}, ya, {}}, vb{xb, {}, yb, {}};
        a.next_batch(va);
        b.next_batch(vb);
        REQUIRE(xa == xb);
        REQUIRE(ya == yb);
    }
}

}  // namespace

TEST_CASE("memory-mapped .npy: the in-memory path's batches, exactly", "[mapped]") {
    test::DataDir dir;
    Bytes pixels(40 * 6 * 5 * 3);
    for (std::size_t i = 0; i < pixels.size(); ++i) pixels[i] = static_cast<std::uint8_t>((i * 37) % 251);
    std::vector<std::int64_t> label_values(40);
    for (int i = 0; i < 40; ++i) label_values[static_cast<std::size_t>(i)] = i % 10;
    const std::string labels_path = dir.write("y.npy", test::npy("<i8", {40}, test::ints(label_values, 8)));
    auto labels = read_labels_file(labels_path);
    REQUIRE(labels);
    Normalization norm{{0.5f, 0.25f, 0.1f}, {2.0f, 1.0f, 0.5f}};
    for (const bool nhwc : {true, false}) {
        const std::vector<std::uint64_t> shape =
            nhwc ? std::vector<std::uint64_t>{40, 6, 5, 3} : std::vector<std::uint64_t>{40, 3, 6, 5};
        const std::string path = dir.write(nhwc ? "nhwc.npy" : "nchw.npy", test::npy("|u1", shape, pixels));
        auto mapped = MappedNpy::open(path, ImageLayout::kAuto);
        INFO((mapped ? std::string() : mapped.error().message));
        REQUIRE(mapped);
        CHECK(((*mapped)->count() == 40 && (*mapped)->shape() == "3x6x5"));
        LabeledImages memory;
        auto images = read_images_file(path, ImageLayout::kAuto);
        REQUIRE(images);
        memory.images = std::move(*images);
        memory.labels = *labels;
        memory.normalization = norm;
        MemorySource in_memory(memory, 7, 3, {1, 2});
        MappedSource from_file(*mapped, *labels, norm, 7, 3, {1, 2});
        same_batches(in_memory, from_file, 7, 90, 9);  // more than the shard's 20: two epochs
        from_file.seek(5);
        in_memory.seek(5);
        same_batches(in_memory, from_file, 7, 90, 2);
    }
    // 8 x 6 x 6 images, which the size rule cannot place (neither axis 1 nor 3 is <= 4): the
    // model's dims decide, as for the in-memory path, and the batches are its batches.
    Bytes deep(40 * 8 * 6 * 6);
    for (std::size_t i = 0; i < deep.size(); ++i) deep[i] = static_cast<std::uint8_t>((i * 13) % 251);
    const ImageDims model{8, 6, 6};
    for (const bool nhwc : {true, false}) {
        const std::vector<std::uint64_t> shape =
            nhwc ? std::vector<std::uint64_t>{40, 6, 6, 8} : std::vector<std::uint64_t>{40, 8, 6, 6};
        const std::string path = dir.write(nhwc ? "deep_nhwc.npy" : "deep_nchw.npy", test::npy("|u1", shape, deep));
        CHECK_FALSE(MappedNpy::open(path, ImageLayout::kAuto));
        auto mapped = MappedNpy::open(path, ImageLayout::kAuto, &model);
        INFO((mapped ? std::string() : mapped.error().message));
        REQUIRE(mapped);
        CHECK((*mapped)->shape() == "8x6x6");
        LabeledImages memory;
        auto images = read_images_file(path, ImageLayout::kAuto, &model);
        REQUIRE(images);
        memory.images = std::move(*images);
        memory.labels = *labels;
        MemorySource in_memory(memory, 5, 3, {0, 1});
        MappedSource from_file(*mapped, *labels, {}, 5, 3, {0, 1});
        same_batches(in_memory, from_file, 5, 288, 4);
    }
    // float32 (N, F) features.
    std::vector<float> values(40 * 6);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<float>(i) * 0.5f - 3;
    const std::string f32 = dir.write("f.npy", test::npy("<f4", {40, 6}, test::floats(values)));
    auto mf = MappedNpy::open(f32, ImageLayout::kAuto);
    REQUIRE(mf);
    CHECK(((*mf)->flat() && (*mf)->shape() == "6 features"));
    MappedEvalSource eval(*mf, *labels, {});
    std::vector<float> x(16 * 6);
    std::vector<std::int32_t> y(16);
    BatchView v{x, {}, y, {}};
    std::size_t seen = 0, n = 0;
    while ((n = eval.next(v, 16)) != 0) {
        for (std::size_t i = 0; i < n; ++i) CHECK(x[i * 6] == values[(seen + i) * 6]);
        seen += n;
    }
    CHECK(seen == 40);

    // Not mappable: gzip, float64, big-endian float32, a truncated file.
    Bytes raw = test::npy("<f4", {40, 6}, test::floats(values));
    Bytes gz(raw.size() + 1024);
    uLongf gz_size = static_cast<uLongf>(gz.size());
    z_stream zs{};
    REQUIRE(deflateInit2(&zs, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK);
    zs.next_in = raw.data();
    zs.avail_in = static_cast<uInt>(raw.size());
    zs.next_out = gz.data();
    zs.avail_out = static_cast<uInt>(gz_size);
    REQUIRE(deflate(&zs, Z_FINISH) == Z_STREAM_END);
    gz.resize(zs.total_out);
    deflateEnd(&zs);
    const auto refused = [&](const std::string& name, const Bytes& bytes, const std::string& message) {
        auto r = MappedNpy::open(dir.write(name, bytes), ImageLayout::kAuto);
        REQUIRE_FALSE(r);
        CHECK_THAT(r.error().message, Catch::Contains(name) && Catch::Contains(message));
    };
    refused("g.npy", gz, "a gzip file cannot be memory-mapped: give --stream off");
    refused("d.npy", test::npy("<f8", {2, 2}, Bytes(32)), "dtype '<f8' cannot be memory-mapped");
    refused("b.npy", test::npy(">f4", {2, 2}, Bytes(16)), "dtype '>f4' cannot be memory-mapped");
    refused("t.npy", test::npy("|u1", {2, 3, 3}, Bytes(17)), "truncated");
}

TEST_CASE("--train-images/--train-labels .npy rows for feature, token and regression models", "[mapped]") {
    test::DataDir dir;
    const std::string x = dir.write("x.npy", test::npy("<f8", {3, 2}, test::floats({})));  // truncated: no data
    ModelInput features{"mlp", 1, 1, 1, 10, InputKind::kFeatures, 2};
    auto bad = load_split_files("train", {x, x}, ImageLayout::kAuto, &features);
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains(x) && Catch::Contains("truncated"));

    const std::string f = dir.write("f.npy", test::npy("<i2", {3, 2}, test::ints({1, -2, 3, 4, 5, 6}, 2)));
    const std::string t = dir.write("t.npy", test::npy("<f4", {3}, test::floats({0.5f, 1.5f, -2.0f})));
    ModelInput regression = features;
    regression.target = TargetKind::kVector;
    regression.target_length = 1;
    auto r = load_split_files("train", {f, t}, ImageLayout::kAuto, &regression);
    INFO((r ? std::string() : r.error().message));
    REQUIRE(r);
    CHECK((r->input == InputKind::kFeatures && r->images.f32 == std::vector<float>{1, -2, 3, 4, 5, 6}));
    CHECK((r->target == TargetKind::kVector && r->targets == std::vector<float>{0.5f, 1.5f, -2.0f}));
    CHECK(check_fits_model(*r, {"x", "y"}, regression));

    ModelInput tokens{"lm", 1, 1, 1, 10, InputKind::kTokens, 2, 6};
    const std::string y = dir.write("y.npy", test::npy("|u1", {3}, Bytes{1, 2, 3}));
    auto tk = load_split_files("train", {f, y}, ImageLayout::kAuto, &tokens);
    REQUIRE(tk);
    CHECK((tk->input == InputKind::kTokens && tk->token_length == 2 && tk->size() == 3));
    auto range = check_fits_model(*tk, {"ids " + f, "y"}, tokens);  // -2 is no token id
    REQUIRE_FALSE(range);
    CHECK(range.error().message == "ids " + f +
                                       ": token id -2 at example 0 position 1 is out of range 0-5 (the model "
                                       "lm has a vocabulary of 6)");
    const std::string fl = dir.write("fl.npy", test::npy("<f4", {3, 2}, test::floats({1, 2, 3, 4, 5, 6})));
    auto not_ids = load_split_files("train", {fl, y}, ImageLayout::kAuto, &tokens);
    REQUIRE_FALSE(not_ids);
    CHECK_THAT(not_ids.error().message, Catch::Contains("is not an integer type"));
}

}  // namespace psrun::worker
