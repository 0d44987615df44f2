// The dispenser's state in a checkpoint (psd/data_chunks_file.h, issue 38): the tensor-file form
// round-trips, damage is refused naming the file, the checkpoint store verifies the file with the
// rest of the checkpoint, and through SAVE/RESTORE an in-process psd 0 continues the epoch in
// progress (the chunks leased but not reported done are leased again; the epoch counts every
// example once), while a checkpoint without the state starts the data at epoch 0.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "common/checkpointer.h"
#include "common/tensor_file.h"
#include "psd/data_chunks_file.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using namespace psrun::psd;
namespace fs = std::filesystem;

namespace {

struct TempDir {
    std::string path = psrun::test::make_temp_dir();
    ~TempDir() { fs::remove_all(path); }
};

std::string read_all(const std::string& path) {
    std::ifstream in(path, std::ios::binary);
    return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

void write_all(const std::string& path, const std::string& bytes) { std::ofstream(path, std::ios::binary) << bytes; }

// A dispenser with 3 complete epochs, epoch 3 partly done and two chunks in flight.
DataChunks busy(ChunkPlan plan) {
    DataChunks d(plan);
    for (std::uint32_t w = 0; d.epochs_complete() < 3; w = (w + 1) % 3) REQUIRE(d.complete(w, d.lease(w).id));
    for (int k = 0; k < 5; ++k) REQUIRE(d.complete(0, d.lease(0).id));
    d.lease(1);
    d.lease(2);
    return d;
}

}  // namespace

TEST_CASE("data chunk file: the state round-trips through its tensor-file form", "[data_chunks]") {
    for (ChunkPlan plan : {ChunkPlan{60000, 60, 7}, ChunkPlan{100, 37, 1}, ChunkPlan{5000, 1000, 1ull << 63}}) {
        INFO(plan.chunks << " chunks");
        const DataChunks d = busy(plan);
        const auto state = d.state();
        const std::string bytes = encode_data_chunks(state);
        auto back = decode_data_chunks(bytes, "x/data-chunks.tensors");
        REQUIRE(back);
        CHECK(*back == state);
        auto tensors = parse_tensor_file(bytes, "x");  // an ordinary tensor file of integral digits
        REQUIRE(tensors);
        REQUIRE(tensors->size() == 3);
        CHECK((*tensors)[2].shape == std::vector<std::uint64_t>{1, 4 + (plan.chunks + 15) / 16});
    }
    // A fresh dispenser (nothing leased yet) has no open epoch.
    const auto fresh = DataChunks({10, 2, 0}).state();
    auto back = decode_data_chunks(encode_data_chunks(fresh), "f");
    REQUIRE(back);
    CHECK(*back == fresh);
}

TEST_CASE("data chunk file: damage is an error naming the file", "[data_chunks]") {
    const auto state = busy({600, 6, 2}).state();
    const std::string good = encode_data_chunks(state);
    const std::string path = "/m/ckpt-0000000040/data-chunks.tensors";
    auto refused = [&](const std::string& bytes, const std::string& says) {
        auto r = decode_data_chunks(bytes, path);
        REQUIRE_FALSE(r);
        CHECK(r.error().message.find(path) != std::string::npos);
        CHECK(r.error().message.find(says) != std::string::npos);
    };
    std::string flipped = good;
    flipped[flipped.size() / 2] ^= 0x10;
    refused(flipped, "");                          // the CRC
    refused(good.substr(0, good.size() - 3), "");  // truncated
    // CRC-valid files whose contents are wrong.
    auto s = state;
    s.open[0].done = {0, 1, 2, 3, 4, 5};  // every chunk of the open epoch done, but the epoch still open
    refused(encode_data_chunks(s), "open epoch 3");
    s = state;
    s.next_epoch = 9;
    refused(encode_data_chunks(s), "9 epochs opened");
    const std::vector<float> header(36, 0.5f);  // digits that are no integers
    const std::vector<float> none;
    const TensorView odd[] = {{"data_chunks/header", {9, 4}, header},
                              {"data_chunks/closed", {0, 12}, none},
                              {"data_chunks/open", {0, 5}, none}};
    refused(encode_tensor_file(odd), "header digits");
    const TensorView other[] = {{"conv1/w@0+4/param", {9, 4}, header}};
    refused(encode_tensor_file(other), "expected the tensors");
    std::vector<float> v2(36, 0.0f);
    v2[0] = 2;
    const TensorView later[] = {
        {"data_chunks/header", {9, 4}, v2}, {"data_chunks/closed", {0, 12}, none}, {"data_chunks/open", {0, 5}, none}};
    refused(encode_tensor_file(later), "version 2");
}

TEST_CASE("data chunk file: written into a checkpoint, verified by the store with it", "[data_chunks]") {
    TempDir model;
    CheckpointStore store(model.path, 5);
    for (std::int64_t step : {10, 20}) {
        auto pending = store.begin(step);
        REQUIRE(pending);
        REQUIRE(save_data_chunks(busy({600, 6, 2}), pending->dir()));
        REQUIRE(pending->commit(nlohmann::json::object()));
    }
    std::vector<std::string> warnings;
    auto latest = store.latest_valid(&warnings);
    REQUIRE(latest);
    CHECK(latest->step == 20);
    CHECK(warnings.empty());
    auto manifest = CheckpointStore::read_manifest(*latest);
    REQUIRE(manifest);
    CHECK((*manifest)["files"] == nlohmann::json::array({kDataChunksFile}));
    auto loaded = load_data_chunks(latest->dir);
    REQUIRE(loaded);
    REQUIRE(loaded->has_value());
    CHECK((*loaded)->state() == busy({600, 6, 2}).state());
    CHECK((*loaded)->epochs_complete() == 3);

    // A flipped byte: the store skips the checkpoint, naming the file; load names it too.
    const std::string file = latest->dir + "/" + kDataChunksFile;
    std::string bytes = read_all(file);
    bytes[bytes.size() - 20] ^= 0x01;
    write_all(file, bytes);
    warnings.clear();
    latest = store.latest_valid(&warnings);
    REQUIRE(latest);
    CHECK(latest->step == 10);
    REQUIRE(warnings.size() == 1);
    CHECK(warnings[0].find(file) != std::string::npos);
    auto damaged = load_data_chunks(fs::path(file).parent_path().string());
    REQUIRE_FALSE(damaged);
    CHECK(damaged.error().message.find(file) != std::string::npos);
    // No file (a checkpoint from before the state was kept): nothing to restore, no error.
    auto none = load_data_chunks(model.path);
    REQUIRE(none);
    CHECK_FALSE(none->has_value());
}

namespace {

wire::InitConfig sgd() {
    wire::InitConfig c;
    c.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f};
    c.last_step = 100;
    return c;
}

CheckpointerOptions checkpoints_in(const std::string& dir) {
    CheckpointerOptions o;
    o.model_dir = dir;
    o.keep = 5;
    o.init = sgd();
    return o;
}

// A chief on a fresh one-shard cluster, restored from `dir`'s newest checkpoint.
std::unique_ptr<PsClient> restored_chief(test::Cluster& cluster, const std::string& dir) {
    auto chief = std::make_unique<PsClient>(cluster.client_options(0, test::small_model()));
    REQUIRE(chief->hello());
    Checkpointer loader(checkpoints_in(dir));
    auto restored = loader.restore(*chief);
    REQUIRE(restored);
    REQUIRE(restored->has_value());
    return chief;
}

}  // namespace

TEST_CASE("data chunks: SAVE and RESTORE through psd 0 continue the epoch in progress", "[data_chunks]") {
    TempDir model;
    const wire::ChunkRequest want{100, 10, 5, true, {}};
    std::set<std::uint32_t> done_before;
    wire::ChunkRef in_flight;
    {
        test::Cluster original(1, test::base_options(2));
        PsClient chief(original.client_options(0, test::small_model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(sgd(), test::ramp(chief.layout().total, 0.5f, -0.2f)));
        // 14 leases, each request reporting the one before: epoch 0 complete, 3 chunks of epoch 1
        // done, the 14th leased and not reported when the checkpoint is written.
        wire::ChunkRequest r = want;
        for (int k = 0; k < 14; ++k) {
            auto g = chief.chunk(r);
            REQUIRE(g);
            REQUIRE(g->leased);
            r.done = {g->id};
            if (g->id.epoch == 1) done_before.insert(g->id.chunk);
            in_flight = g->id;
        }
        done_before.erase(in_flight.chunk);
        REQUIRE(in_flight.epoch == 1);
        REQUIRE(done_before.size() == 3);
        REQUIRE(Checkpointer(checkpoints_in(model.path)).save(chief, 0));
    }
    test::Cluster fresh(1, test::base_options(2));  // psd 0 restarted
    auto chief = restored_chief(fresh, model.path);
    // The old holder's report of its lease from before the checkpoint is not counted.
    wire::ChunkRequest r = want;
    r.done = {in_flight};
    std::set<std::uint32_t> after;
    for (int k = 0; k < 7; ++k) {
        auto g = chief->chunk(r);
        REQUIRE(g);
        CHECK(g->id.epoch == 1);
        after.insert(g->id.chunk);
        r.done = {g->id};
    }
    CHECK(after.count(in_flight.chunk) == 1);  // leased again
    for (auto c : done_before) CHECK(after.count(c) == 0);
    auto g = chief->chunk(r);  // reports the 7th: epoch 1 complete, the next lease opens epoch 2
    REQUIRE(g);
    CHECK(g->id.epoch == 2);
    auto stats = chief->stats(0);
    REQUIRE(stats);
    const auto& c = (*stats)["data_chunks"];
    CHECK(c["epochs_complete"] == 2);
    CHECK(c["epochs_inexact"] == 0);
    CHECK(c["stale_reports"] == 1);
    for (const auto& e : c["epochs"])
        if (e["complete"].get<bool>()) CHECK(e["examples"] == 100);
}

TEST_CASE("data chunks: a checkpoint without the state, or another plan, starts the data at epoch 0", "[data_chunks]") {
    TempDir model;
    {
        test::Cluster original(1, test::base_options(1));
        PsClient chief(original.client_options(0, test::small_model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(sgd(), test::ramp(chief.layout().total, 0.5f, -0.2f)));
        REQUIRE(Checkpointer(checkpoints_in(model.path)).save(chief, 0));  // no CHUNK yet: no state
        REQUIRE_FALSE(fs::exists(model.path + "/ckpt-0000000000/" + kDataChunksFile));
        wire::ChunkRequest r{100, 10, 5, true, {}};
        for (int k = 0; k < 12; ++k) {
            auto g = chief.chunk(r);
            REQUIRE(g);
            r.done = {g->id};
        }
        REQUIRE(Checkpointer(checkpoints_in(model.path)).save(chief, 1));  // epoch 1 in progress
    }
    {
        test::Cluster fresh(1, test::base_options(1));
        auto chief = restored_chief(fresh, model.path);
        auto g = chief->chunk(wire::ChunkRequest{100, 20, 5, true, {}});  // resumed with --data-chunks 20
        REQUIRE(g);
        CHECK(g->id.epoch == 0);
        CHECK(g->count == 5);
    }
    fs::remove_all(model.path + "/ckpt-0000000001");  // the newest is the one without state
    test::Cluster fresh(1, test::base_options(1));
    auto chief = restored_chief(fresh, model.path);
    auto g = chief->chunk(wire::ChunkRequest{100, 10, 5, true, {}});
    REQUIRE(g);
    CHECK(g->id.epoch == 0);
}
