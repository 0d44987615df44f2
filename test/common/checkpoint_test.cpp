#include <catch2/catch.hpp>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "common/checkpoint_store.h"
#include "common/tensor_file.h"

namespace fs = std::filesystem;
using psrun::CheckpointStore;
using psrun::TensorView;

namespace checkpoint_test {

namespace {

fs::path temp_dir() {
    std::string tmpl = (fs::temp_directory_path() / "psrun-ckpt-XXXXXX").string();
    REQUIRE(mkdtemp(tmpl.data()) != nullptr);
    return tmpl;
}

void flip_byte(const std::string& path, std::size_t offset_from_end) {
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekg(0, std::ios::end);
    const auto size = static_cast<std::size_t>(f.tellg());
    f.seekg(static_cast<std::streamoff>(size - offset_from_end));
    char c;
    f.get(c);
    f.seekp(static_cast<std::streamoff>(size - offset_from_end));
    f.put(static_cast<char>(c ^ 0x10));
}

void save(const CheckpointStore& store, std::int64_t step, float value) {
    auto pending = store.begin(step);
    REQUIRE(pending);
    std::vector<float> w(100, value);
    const std::vector<TensorView> tensors{{"fc/w", {10, 10}, w}};
    REQUIRE(psrun::write_tensor_file(pending->dir() + "/shard-0.tensors", tensors));
    auto info = pending->commit({{"global_step", step}});
    REQUIRE(info);
    CHECK(info->step == step);
}

}  // namespace

TEST_CASE("tensor files round-trip and detect damage", "[tensor_file]") {
    const auto dir = temp_dir();
    const auto path = (dir / "t.tensors").string();
    std::vector<float> a{1, 2, 3, 4, 5, 6}, b{-1.5f};
    const std::vector<TensorView> tensors{{"a", {2, 3}, a}, {"bias", {1}, b}};
    REQUIRE(psrun::write_tensor_file(path, tensors));

    auto back = psrun::read_tensor_file(path);
    REQUIRE(back);
    REQUIRE(back->size() == 2);
    CHECK((*back)[0].name == "a");
    CHECK((*back)[0].shape == std::vector<std::uint64_t>{2, 3});
    CHECK((*back)[0].data == a);
    CHECK((*back)[1].data == b);

    SECTION("a flipped bit in the data names the tensor") {
        flip_byte(path, 22);  // footer 16 + crc 4 + into the last float of "bias"
        auto bad = psrun::read_tensor_file(path);
        REQUIRE_FALSE(bad);
        CHECK(bad.error().message.find("CRC32C") != std::string::npos);
        CHECK(bad.error().message.find("bias") != std::string::npos);
    }
    SECTION("a truncated file is refused") {
        fs::resize_file(path, fs::file_size(path) - 5);
        auto bad = psrun::read_tensor_file(path);
        REQUIRE_FALSE(bad);
        CHECK(bad.error().message.find(path) != std::string::npos);
    }
    SECTION("a file of another kind is refused") {
        std::ofstream(path, std::ios::trunc) << "hello";
        CHECK_FALSE(psrun::read_tensor_file(path));
    }
    fs::remove_all(dir);
}

TEST_CASE("checkpoints commit atomically, keep N and fall back past damage", "[checkpoint]") {
    const auto dir = temp_dir();
    const CheckpointStore store(dir.string(), 2);
    save(store, 100, 1.0f);
    save(store, 200, 2.0f);
    save(store, 300, 3.0f);

    auto all = store.list();
    REQUIRE(all.size() == 2);  // keep=2 pruned step 100
    CHECK(all[0].step == 200);
    CHECK(all[1].step == 300);
    std::ifstream state(dir / "checkpoint");
    const auto json = nlohmann::json::parse(state);
    CHECK(json["latest"] == "ckpt-0000000300");
    CHECK(json["all"].size() == 2);

    std::vector<std::string> warnings;
    auto latest = store.latest_valid(&warnings);
    REQUIRE(latest);
    CHECK(latest->step == 300);
    CHECK(warnings.empty());

    SECTION("a corrupted newest checkpoint falls back to the previous one, with a warning") {
        flip_byte(all[1].dir + "/shard-0.tensors", 20);
        latest = store.latest_valid(&warnings);
        REQUIRE(latest);
        CHECK(latest->step == 200);
        REQUIRE(warnings.size() == 1);
        CHECK(warnings[0].find("shard-0.tensors") != std::string::npos);
    }
    SECTION("an uncommitted checkpoint leaves nothing behind") {
        {
            auto pending = store.begin(400);
            REQUIRE(pending);
            REQUIRE(fs::exists(pending->dir()));
        }
        CHECK(store.list().size() == 2);
        for (const auto& entry : fs::directory_iterator(dir))
            CHECK(entry.path().filename().string().find(".tmp") == std::string::npos);
    }
    fs::remove_all(dir);
}

TEST_CASE("an empty model dir has no valid checkpoint", "[checkpoint]") {
    const auto dir = temp_dir();
    auto none = CheckpointStore(dir.string(), 5).latest_valid(nullptr);
    REQUIRE_FALSE(none);
    CHECK(none.error().code == psrun::ErrorCode::kNotFound);
    fs::remove_all(dir);
}

TEST_CASE("tensor files in memory: empty tensors round-trip, overflowing shapes are refused", "[tensor_file]") {
    const std::vector<TensorView> empty{{"e", {0, 7}, {}}};
    const std::string bytes = psrun::encode_tensor_file(empty);
    auto back = psrun::parse_tensor_file(bytes, "mem");
    REQUIRE(back);
    REQUIRE(back->size() == 1);
    CHECK((*back)[0].data.empty());
    CHECK((*back)[0].shape == std::vector<std::uint64_t>{0, 7});

    // 2^32 x 2^32 elements wrap to 0 in 64 bits: the CRCs are right, the shape is impossible.
    const std::vector<TensorView> huge{{"x", {std::uint64_t{1} << 32, std::uint64_t{1} << 32}, {}}};
    auto bad = psrun::parse_tensor_file(psrun::encode_tensor_file(huge), "mem");
    REQUIRE_FALSE(bad);
    CHECK_THAT(bad.error().message, Catch::Contains("impossible shape") && Catch::Contains("'x'"));
}

TEST_CASE("a manifest lists plain file names inside its checkpoint", "[checkpoint]") {
    CHECK(CheckpointStore::parse_manifest(R"({"step": 3, "files": ["ps-0.tensors"]})", "m.json"));
    for (const char* text :
         {R"({"files": ["../../etc/passwd"]})", R"({"files": ["a/b"]})", R"({"files": [".."]})", R"({"files": [""]})",
          R"({"files": [1]})", R"({"files": "a"})", R"({"step": 3})", "[]", "{", ""}) {
        auto m = CheckpointStore::parse_manifest(text, "m.json");
        INFO(text);
        REQUIRE_FALSE(m);
        CHECK_THAT(m.error().message, Catch::Contains("m.json: not a valid manifest"));
    }
}

}  // namespace checkpoint_test
