// Loading a checkpoint's full parameter vector (common/checkpoint_params.h), from checkpoints
// written by real in-process psd shards through the chief's Checkpointer (SAVE).
#include "common/checkpoint_params.h"

#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <fstream>

#include "common/checkpointer.h"
#include "common/tensor_file.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::small_model;
using psrun::test::TempModelDir;
namespace fs = std::filesystem;

namespace {

psd::ServerOptions server_options() {
    psd::ServerOptions o;
    o.num_workers = 1;
    o.worker_timeout = std::chrono::milliseconds(30000);
    return o;
}

// Trains `steps` Adam steps on a K-shard cluster, saves a checkpoint at `steps` into `model_dir`
// and returns the parameters psd held at that moment (pulled by the chief).
std::vector<float> save_trained(std::uint32_t shards, int steps, const std::string& model_dir, CheckpointInfo& info) {
    Cluster cluster(shards, server_options());
    PsClient chief(cluster.client_options(0, small_model()));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    wire::InitConfig init;
    init.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 1e-2f};
    init.last_step = 100;
    REQUIRE(chief.init(init, ramp(n, 0.5f, -0.2f)));
    std::vector<float> params(n);
    for (int s = 0; s < steps; ++s)
        REQUIRE(
            chief.push_pull(ramp(n, 0.3f * static_cast<float>(s + 1), -0.1f), static_cast<std::uint64_t>(s), params));
    Checkpointer saver(CheckpointerOptions{model_dir, 5, 0, 0, init, nullptr});
    auto saved = saver.save(chief, static_cast<std::uint64_t>(steps));
    REQUIRE(saved);
    info = *saved;
    return params;
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
    return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("a checkpoint written by K psd shards loads as the full parameter vector", "[checkpoint_params]") {
    const std::uint32_t shards = GENERATE(1u, 2u, 3u);
    TempModelDir model;
    CheckpointInfo info;
    const auto expected = save_trained(shards, 2, model.path, info);
    REQUIRE(expected.size() == total_elements(small_model()));

    auto loaded = load_checkpoint_parameters(info.dir, small_model());
    REQUIRE(loaded);
    CHECK(loaded->step == 2);
    CHECK(loaded->shards == shards);
    CHECK(bit_equal(loaded->values, expected));
    // The parameters changed with training: the loader did not return the initial values.
    CHECK_FALSE(bit_equal(loaded->values, ramp(expected.size(), 0.5f, -0.2f)));
}

TEST_CASE("a damaged, incomplete or foreign checkpoint is refused with the file named", "[checkpoint_params]") {
    TempModelDir model;
    CheckpointInfo info;
    save_trained(2, 1, model.path, info);
    const std::string shard1 = info.dir + "/ps-1-of-2.tensors";

    SECTION("a flipped bit in a shard file") {
        {
            std::fstream f(shard1, std::ios::in | std::ios::out | std::ios::binary);
            f.seekg(200);
            char c = 0;
            f.get(c);
            f.seekp(200);
            f.put(static_cast<char>(c ^ 0x01));
        }
        auto loaded = load_checkpoint_parameters(info.dir, small_model());
        REQUIRE_FALSE(loaded);
        CHECK_THAT(loaded.error().message, Catch::Contains("ps-1-of-2.tensors"));
    }
    SECTION("a shard file listed in the manifest is missing") {
        fs::remove(shard1);
        auto loaded = load_checkpoint_parameters(info.dir, small_model());
        REQUIRE_FALSE(loaded);
        CHECK_THAT(loaded.error().message, Catch::Contains("ps-1-of-2.tensors"));
    }
    SECTION("the model has a tensor the checkpoint does not hold") {
        auto tensors = small_model();
        tensors.push_back({"extra", {3}});
        auto loaded = load_checkpoint_parameters(info.dir, tensors);
        REQUIRE_FALSE(loaded);
        CHECK_THAT(loaded.error().message, Catch::Contains("'extra'"));
    }
    SECTION("the checkpoint was written for a bigger tensor") {
        auto tensors = small_model();
        tensors[0].shape = {10, 10};  // "w" is [100, 90] in the checkpoint
        auto loaded = load_checkpoint_parameters(info.dir, tensors);
        REQUIRE_FALSE(loaded);
        CHECK_THAT(loaded.error().message, Catch::Contains("does not fit tensor 'w'"));
    }
    SECTION("no manifest, no directory") {
        fs::remove(info.dir + "/manifest.json");
        CHECK(load_checkpoint_parameters(info.dir, small_model()).error().code == ErrorCode::kNotFound);
        CHECK(load_checkpoint_parameters(model.path + "/nowhere", small_model()).error().code == ErrorCode::kNotFound);
    }
}

namespace {

// A checkpoint of one [5, 2] table "emb" written by hand as two shards' row pieces holding
// `rows0` and `rows1` (row ids, in local order); row r's values are 10 r and 10 r + 1.
std::string write_table_checkpoint(const std::string& dir, const std::vector<std::uint64_t>& rows0,
                                   const std::vector<std::uint64_t>& rows1) {
    const std::vector<std::vector<std::uint64_t>> pieces = {rows0, rows1};
    for (std::uint32_t s = 0; s < 2; ++s) {
        std::vector<float> values;
        for (const auto r : pieces[s]) values.insert(values.end(), {10.0f * r, 10.0f * r + 1});
        const std::vector<TensorView> views = {
            {row_piece_base_name("emb", s, 2) + "/param", {pieces[s].size(), 2}, values}};
        REQUIRE(write_tensor_file(dir + "/ps-" + std::to_string(s) + "-of-2.tensors", views));
    }
    std::ofstream(dir + "/manifest.json") << R"({"step": 7, "files": ["ps-0-of-2.tensors", "ps-1-of-2.tensors"]})";
    return dir;
}

}  // namespace

TEST_CASE("a sparse table's pieces load spread or whole, and pieces of neither shape are refused",
          "[checkpoint_params]") {
    TempModelDir model;
    const std::vector<TensorSpec> tensors = {{"emb", {5, 2}}};
    const std::vector<float> table = {0, 1, 10, 11, 20, 21, 30, 31, 40, 41};
    SECTION("spread: shard s holds rows s, s + 2, ...") {
        auto loaded = load_checkpoint_parameters(write_table_checkpoint(model.path, {0, 2, 4}, {1, 3}), tensors);
        REQUIRE(loaded);
        CHECK(loaded->values == table);
    }
    SECTION("whole on shard 1, none on shard 0") {
        auto loaded = load_checkpoint_parameters(write_table_checkpoint(model.path, {}, {0, 1, 2, 3, 4}), tensors);
        REQUIRE(loaded);
        CHECK(loaded->values == table);
    }
    SECTION("shard 0's rows are missing: refused, not read as zeros") {
        auto loaded = load_checkpoint_parameters(write_table_checkpoint(model.path, {}, {1, 3}), tensors);
        REQUIRE_FALSE(loaded);
        CHECK(loaded.error().code == ErrorCode::kInvalidArgument);
        CHECK_THAT(loaded.error().message, Catch::Contains("'emb'") && Catch::Contains("0, 2 rows"));
    }
    SECTION("a piece of another width") {
        auto loaded =
            load_checkpoint_parameters(write_table_checkpoint(model.path, {0, 2, 4}, {1, 3}), {{"emb", {3, 3}}});
        REQUIRE_FALSE(loaded);
        CHECK_THAT(loaded.error().message, Catch::Contains("not whole rows of width 3"));
    }
}
