#include <catch2/catch.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "common/crc32c.h"
#include "common/event_writer.h"
#include "common/tfrecord.h"

namespace fs = std::filesystem;

namespace summary_test {

namespace {

std::span<const std::byte> bytes_of(const std::string& s) {
    return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

fs::path temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "psrun-test-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    return tmpl;
}

}  // namespace

TEST_CASE("crc32c matches the Castagnoli check values", "[crc32c]") {
    CHECK(psrun::crc32c(bytes_of("123456789")) == 0xE3069283u);
    CHECK(psrun::crc32c(bytes_of("")) == 0u);
    // 32 zero bytes: check value from RFC 3720 (iSCSI), B.4.
    CHECK(psrun::crc32c(bytes_of(std::string(32, '\0'))) == 0x8A9136AAu);
    // Extending in pieces equals one pass, across the 8-byte fast path boundary.
    const std::string text = "The quick brown fox jumps over the lazy dog";
    const auto whole = psrun::crc32c(bytes_of(text));
    const auto part = psrun::crc32c_extend(psrun::crc32c(bytes_of(text.substr(0, 13))), bytes_of(text.substr(13)));
    CHECK(part == whole);
}

TEST_CASE("tfrecords round-trip and corruption is detected", "[tfrecord]") {
    const auto dir = temp_dir();
    const auto path = (dir / "r.tfrecord").string();
    std::string file;
    psrun::append_tfrecord(file, "first");
    psrun::append_tfrecord(file, std::string(1000, 'x'));
    { std::ofstream(path, std::ios::binary) << file; }
    auto records = psrun::read_tfrecords(path);
    REQUIRE(records);
    REQUIRE(records->size() == 2);
    CHECK((*records)[0] == "first");
    CHECK((*records)[1].size() == 1000);

    SECTION("a flipped data byte fails the data CRC") {
        file[12 + 2] ^= 0x40;
        std::ofstream(path, std::ios::binary | std::ios::trunc) << file;
        auto bad = psrun::read_tfrecords(path);
        REQUIRE_FALSE(bad);
        CHECK(bad.error().message.find("data CRC") != std::string::npos);
    }
    SECTION("a truncated file is reported with the offset") {
        std::ofstream(path, std::ios::binary | std::ios::trunc) << file.substr(0, file.size() - 3);
        auto bad = psrun::read_tfrecords(path);
        REQUIRE_FALSE(bad);
        CHECK(bad.error().message.find("truncated") != std::string::npos);
    }
    fs::remove_all(dir);
}

TEST_CASE("event files hold the version record and decodable scalars", "[events]") {
    const auto dir = temp_dir();
    std::string path;
    {
        psrun::EventWriter writer(dir.string(), "testhost");
        writer.add_scalar("loss", 100, 0.25f, 1700000000.5);
        writer.add_scalar("accuracy", 200, 0.99f, 1700000001.0);
        path = writer.path();
    }
    CHECK(fs::path(path).filename().string().rfind("events.out.tfevents.", 0) == 0);
    auto records = psrun::read_tfrecords(path);
    REQUIRE(records);
    REQUIRE(records->size() == 3);
    CHECK((*records)[0].find("brain.Event:2") != std::string::npos);
    CHECK(psrun::decode_scalar_event((*records)[0]).error().code == psrun::ErrorCode::kNotFound);
    auto loss = psrun::decode_scalar_event((*records)[1]);
    REQUIRE(loss);
    CHECK(loss->tag == "loss");
    CHECK(loss->step == 100);
    CHECK(loss->value == 0.25f);
    CHECK(loss->wall_time == 1700000000.5);
    auto acc = psrun::decode_scalar_event((*records)[2]);
    REQUIRE(acc);
    CHECK(acc->tag == "accuracy");
    CHECK(acc->step == 200);
    CHECK(acc->value == Approx(0.99f));
    // Hand-checked encoding of a tiny event: wall_time=0, step=1, tag "a", value 1.0f.
    // Event{1: fixed64 0, 2: varint 1, 5: Summary{1: Value{1: "a", 2: fixed32 1.0f}}}
    const std::string expected(
        "\x09\0\0\0\0\0\0\0\0\x10\x01\x2a\x0a\x0a\x08\x0a\x01"
        "a\x15\0\0\x80\x3f",
        23);
    CHECK(psrun::encode_scalar_event("a", 1, 1.0f, 0.0) == expected);
    CHECK_FALSE(psrun::decode_scalar_event(std::string("\x0a\xff", 2)));
    fs::remove_all(dir);
}

}  // namespace summary_test
