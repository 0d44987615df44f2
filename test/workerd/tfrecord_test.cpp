// TFRecord framing (CRC-32C against its published check value, masked CRCs, gzip, every damage
// named by file and offset, --corrupt-records skip) and tf.train.Example at the wire level
// (packed and unpacked lists, merged entries, truncation).
#include <catch2/catch.hpp>
#include <cstring>

#include "common/crc32c.h"
#include "test/workerd/data_files.h"
#include "workerd/data/example_proto.h"
#include "workerd/data/tfrecord_reader.h"
#include "workerd/data/tfrecord_writer.h"

namespace psrun::worker {
namespace {

using test::Bytes;

Bytes bytes_of(std::string_view s) { return Bytes(s.begin(), s.end()); }

std::uint32_t crc_of(std::string_view s) { return crc32c({reinterpret_cast<const std::byte*>(s.data()), s.size()}); }

Bytes concat(std::initializer_list<Bytes> parts) {
    Bytes out;
    for (const auto& p : parts) out.insert(out.end(), p.begin(), p.end());
    return out;
}

}  // namespace

TEST_CASE("CRC-32C check value and TFRecord's masking", "[tfrecord]") {
    CHECK(crc_of("123456789") == 0xE3069283u);  // the CRC-32C check value (RFC 3720)
    CHECK(crc_of("") == 0u);
    const std::uint32_t c = crc_of("123456789");
    CHECK(crc32c_mask(c) == ((((c >> 15) | (c << 17)) + 0xa282ead8u) & 0xffffffffu));
    // A record of the 3 bytes "abc", framed by hand: length 3, its masked CRC, data, data CRC.
    const Bytes framed = frame_tfrecord(bytes_of("abc"));
    REQUIRE(framed.size() == 3 + 16);
    CHECK(framed[0] == 3);
    std::uint32_t length_crc = 0, data_crc = 0;
    std::memcpy(&length_crc, framed.data() + 8, 4);
    std::memcpy(&data_crc, framed.data() + 15, 4);
    CHECK(length_crc == crc32c_mask(crc_of(std::string_view("\x03\0\0\0\0\0\0\0", 8))));
    CHECK(data_crc == crc32c_mask(crc_of("abc")));
}

TEST_CASE("TFRecord files: plain and gzip round trips; damage named by file and offset", "[tfrecord]") {
    test::DataDir dir;
    for (const bool gz : {false, true}) {
        const std::string path = dir.file(gz ? "r.tfrecord.gz" : "r.tfrecord");
        auto w = TfrecordWriter::create(path, gz);
        REQUIRE(w);
        REQUIRE(w->write(bytes_of("first")));
        REQUIRE(w->write(Bytes{}));
        REQUIRE(w->write(Bytes(100000, 7)));
        REQUIRE(w->close());
        auto r = TfrecordReader::open(path, CorruptRecords::kError);
        REQUIRE(r);
        CHECK((*r)->compressed() == gz);
        Bytes rec;
        REQUIRE(*(*r)->next(rec));
        CHECK(rec == bytes_of("first"));
        REQUIRE(*(*r)->next(rec));
        CHECK((rec.empty() && (*r)->record_index() == 1 && (*r)->record_offset() == 5 + 16));
        REQUIRE(*(*r)->next(rec));
        CHECK(rec == Bytes(100000, 7));
        CHECK_FALSE(*(*r)->next(rec));
    }
    const Bytes a = frame_tfrecord(bytes_of("aaaa")), b = frame_tfrecord(bytes_of("bbbbbb")),
                c = frame_tfrecord(bytes_of("cc"));
    CHECK(looks_like_tfrecord(a));
    CHECK_FALSE(looks_like_tfrecord(bytes_of("not a record at all")));

    // A flipped data byte in record 1 (offset 20): an error naming it, or skipped and counted.
    Bytes bad_data = concat({a, b, c});
    bad_data[a.size() + 12] ^= 1;
    auto err = parse_tfrecords(bad_data, "f.tfrecord", CorruptRecords::kError);
    REQUIRE_FALSE(err);
    CHECK_THAT(err.error().message,
               Catch::StartsWith("f.tfrecord: record 1 at offset 20: the CRC of its 6 data bytes"));
    std::uint64_t skipped = 0;
    auto skip = parse_tfrecords(bad_data, "f.tfrecord", CorruptRecords::kSkip, &skipped);
    REQUIRE(skip);
    CHECK((skip->size() == 2 && (*skip)[1] == bytes_of("cc") && skipped == 1));

    // A damaged length field loses the framing: error, or the rest of the file skipped.
    Bytes bad_length = concat({a, b, c});
    bad_length[a.size()] ^= 0x40;
    auto lost = parse_tfrecords(bad_length, "g.tfrecord", CorruptRecords::kError);
    REQUIRE_FALSE(lost);
    CHECK_THAT(lost.error().message, Catch::Contains("g.tfrecord: record 1 at offset 20: the CRC of the length field"));
    auto rest = parse_tfrecords(bad_length, "g.tfrecord", CorruptRecords::kSkip, &skipped);
    REQUIRE(rest);
    CHECK((rest->size() == 1 && skipped == 1));

    // Truncated in the header, in the data, in the footer.
    const Bytes whole = concat({a, b});
    for (const std::size_t cut : {a.size() + 5, a.size() + 14, whole.size() - 2}) {
        auto t = parse_tfrecords(Bytes(whole.begin(), whole.begin() + static_cast<std::ptrdiff_t>(cut)), "t.tfrecord",
                                 CorruptRecords::kError);
        REQUIRE_FALSE(t);
        CHECK_THAT(t.error().message, Catch::StartsWith("t.tfrecord: record 1 at offset 20: truncated"));
    }
    // An absurd length whose CRC is right is refused before any allocation.
    Bytes huge(12);
    const std::uint64_t len = std::uint64_t{1} << 40;
    std::memcpy(huge.data(), &len, 8);
    const std::uint32_t mc = crc32c_mask(crc32c({reinterpret_cast<const std::byte*>(huge.data()), 8}));
    std::memcpy(huge.data() + 8, &mc, 4);
    auto h = parse_tfrecords(huge, "h.tfrecord", CorruptRecords::kSkip);
    REQUIRE_FALSE(h);
    CHECK_THAT(h.error().message, Catch::Contains("exceeds the limit"));
    auto missing = TfrecordReader::open(dir.file("none.tfrecord"), CorruptRecords::kError);
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message, Catch::Contains("none.tfrecord: cannot open"));
}

TEST_CASE("tf.train.Example: the builder's bytes parse back; packed and unpacked lists", "[tfrecord]") {
    const Bytes png{0x89, 'P', 'N', 'G'};
    const std::vector<float> f{1.5f, -2.0f};
    const std::vector<std::int64_t> i{3, -1, 1LL << 40};
    const Bytes ex = ExampleBuilder().add_bytes("image/encoded", png).add_floats("x", f).add_int64s("y", i).serialize();
    const std::vector<std::string> keys{"y", "image/encoded", "x", "absent"};
    std::vector<FeatureValues> v(4);
    REQUIRE(parse_example(ex, keys, v));
    CHECK((v[0].kind == FeatureKind::kInt64 && v[0].ints == i));
    CHECK((v[1].kind == FeatureKind::kBytes && v[1].bytes.size() == 1 &&
           Bytes(v[1].bytes[0].begin(), v[1].bytes[0].end()) == png));
    CHECK((v[2].kind == FeatureKind::kFloat && v[2].floats == f));
    CHECK(v[3].kind == FeatureKind::kMissing);
    CHECK(describe_example_keys(ex) == "'image/encoded' (bytes_list), 'x' (float_list), 'y' (int64_list)");

    // Unpacked: Example{features{feature{key "k" value{int64_list{value: 5, value: 6}}}}} by hand,
    // then a second entry of "k" holding a float_list (the later entry wins).
    const Bytes int64_list{0x08, 0x05, 0x08, 0x06};
    const Bytes feature = concat({{0x1a, static_cast<std::uint8_t>(int64_list.size())}, int64_list});
    const Bytes entry = concat({{0x0a, 0x01, 'k', 0x12, static_cast<std::uint8_t>(feature.size())}, feature});
    const Bytes float_list{0x0d, 0, 0, 0x80, 0x3f};  // one unpacked float 1.0
    const Bytes feature2 = concat({{0x12, static_cast<std::uint8_t>(float_list.size())}, float_list});
    const Bytes entry2 = concat({{0x0a, 0x01, 'k', 0x12, static_cast<std::uint8_t>(feature2.size())}, feature2});
    const Bytes features = concat({{0x0a, static_cast<std::uint8_t>(entry.size())}, entry});
    const Bytes example = concat({{0x0a, static_cast<std::uint8_t>(features.size())}, features});
    const std::vector<std::string> k{"k"};
    std::vector<FeatureValues> one(1);
    REQUIRE(parse_example(example, k, one));
    CHECK(one[0].ints == std::vector<std::int64_t>{5, 6});
    const Bytes features2 = concat({features, {0x0a, static_cast<std::uint8_t>(entry2.size())}, entry2});
    const Bytes example2 = concat({{0x0a, static_cast<std::uint8_t>(features2.size())}, features2});
    REQUIRE(parse_example(example2, k, one));
    CHECK((one[0].kind == FeatureKind::kFloat && one[0].floats == std::vector<float>{1.0f}));

    // Every truncation of a valid Example is an error or a shorter valid message, never a crash.
    for (std::size_t n = 0; n < ex.size(); ++n) {
        std::vector<FeatureValues> t(4);
        (void)parse_example(std::span<const std::uint8_t>(ex.data(), n), keys, t);
    }
    auto cut = parse_example(std::span<const std::uint8_t>(ex.data(), ex.size() - 1), keys, v);
    REQUIRE_FALSE(cut);
    CHECK_THAT(cut.error().message, Catch::Contains("runs past the end"));
    const Bytes group{0x0b};  // field 1, wire type 3 (a group)
    REQUIRE_FALSE(parse_example(group, keys, v));
}

}  // namespace psrun::worker
