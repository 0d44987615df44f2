// psd 0's data dispenser in its standby shard file (issue 38, psd/shard_state_file.cpp version 9):
// ShardState::save/load carry it with the shard, an older file (version 8, none) still loads, a
// damaged dispenser section is an error naming the file that leaves the shard as it was, and a
// standby psd 0 started on the file goes on with the epoch in progress instead of epoch 0.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <set>

#include "common/tensor_file.h"
#include "psd/data_chunks_file.h"
#include "psd/shard_state.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using namespace psrun::psd;
namespace fs = std::filesystem;

namespace shard_file_chunks_test {

namespace {

struct TempDir {
    std::string path = psrun::test::make_temp_dir();
    ~TempDir() { fs::remove_all(path); }
};

// A dispenser with 3 complete epochs, epoch 3 partly done and two chunks in flight.
DataChunks busy(ChunkPlan plan) {
    DataChunks d(plan);
    for (std::uint32_t w = 0; d.epochs_complete() < 3; w = (w + 1) % 3) REQUIRE(d.complete(w, d.lease(w).id));
    for (int k = 0; k < 5; ++k) REQUIRE(d.complete(0, d.lease(0).id));
    d.lease(1);
    d.lease(2);
    return d;
}

wire::InitConfig sgd() {
    wire::InitConfig c;
    c.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f};
    c.last_step = 100;
    return c;
}

// psd 0 of one shard of the small model, holding nothing yet.
ShardState blank_shard() {
    const auto tensors = test::small_model();
    return ShardState(*compute_layout(tensors, 1), 0, tensors);
}

// One span per own slice of `s`, each a ramp of `scale`.
struct SliceValues {
    std::vector<std::vector<float>> values;
    std::vector<std::span<const float>> spans() const { return {values.begin(), values.end()}; }
};
SliceValues ramps(const ShardState& s, float scale) {
    SliceValues v;
    for (auto id : s.slice_ids()) v.values.push_back(test::ramp(s.layout().slices[id].length, scale));
    return v;
}

// Initialises `s` and applies one step (step 1).
void step_once(ShardState& s) {
    s.init(sgd(), ramps(s, 0.5f).spans());
    s.apply(ramps(s, -0.3f).spans());
}

// Saves a shard at step 1 to `path`, with `chunks` (may be null).
void save_shard(const std::string& path, const DataChunks* chunks) {
    ShardState s = blank_shard();
    step_once(s);
    REQUIRE(s.save(path, chunks));
}

// Rewrites the tensor file at `path` through `edit` (its CRCs computed again: the damage is past them).
template <typename Edit>
void rewrite(const std::string& path, Edit edit) {
    auto file = read_tensor_file(path);
    REQUIRE(file);
    edit(*file);
    std::vector<TensorView> views;
    for (const auto& t : *file) views.push_back({t.name, t.shape, t.data});
    REQUIRE(write_tensor_file(path, views));
}

}  // namespace

TEST_CASE("shard file: psd 0's dispenser is saved with the shard and restored with it", "[psd][shard][data_chunks]") {
    TempDir dir;
    const std::string path = dir.path + "/ps-0.shard";
    const DataChunks d = busy({600, 6, 2});
    save_shard(path, &d);

    ShardState b = blank_shard();
    std::optional<DataChunks> got;
    REQUIRE(b.load(path, &got));
    CHECK(b.step() == 1);
    REQUIRE(got.has_value());
    CHECK(got->state() == d.state());
    CHECK(got->epochs_complete() == 3);
    // The open epoch goes on: its chunks not done (the two in flight included) are leased, then epoch 4.
    const ChunkLease last = got->lease(0);  // epoch 3's sixth chunk, leased when saved
    CHECK(last.id.epoch == 3);
    REQUIRE(got->complete(0, last.id));
    CHECK(got->epochs_complete() == 4);
    CHECK(got->lease(0).id.epoch == 4);
    REQUIRE(blank_shard().load(path));  // the caller may ignore the dispenser

    // No dispenser given (psd i > 0, no --data-chunks): the file holds none, load says so.
    save_shard(path, nullptr);
    auto file = read_tensor_file(path);
    REQUIRE(file);
    for (const auto& t : *file) CHECK(t.name.rfind("data_chunks/", 0) == std::string::npos);
    got = busy({60, 6, 1});
    REQUIRE(blank_shard().load(path, &got));
    CHECK_FALSE(got.has_value());
}

TEST_CASE("shard file: a version 8 file (before the dispenser) still loads, with no dispenser",
          "[psd][shard][data_chunks]") {
    TempDir dir;
    const std::string path = dir.path + "/ps-0.shard";
    save_shard(path, nullptr);
    rewrite(path, [](std::vector<NamedTensor>& t) {
        REQUIRE(t[0].data[0] == 10.0f);  // the current version
        t[0].data[0] = 8.0f;
    });
    ShardState b = blank_shard();
    std::optional<DataChunks> got = busy({60, 6, 1});
    auto loaded = b.load(path, &got);
    INFO((loaded ? std::string() : loaded.error().message));
    REQUIRE(loaded);
    CHECK(b.step() == 1);
    CHECK_FALSE(got.has_value());
    // A version 8 file never held the section: extra tensors are not taken for one.
    const DataChunks d = busy({600, 6, 2});
    save_shard(path, &d);
    rewrite(path, [](std::vector<NamedTensor>& t) { t[0].data[0] = 8.0f; });
    auto refused = blank_shard().load(path, &got);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("wrong number of tensors"));
}

TEST_CASE("shard file: a damaged dispenser section is an error naming the file; the shard is left as it was",
          "[psd][shard][data_chunks]") {
    TempDir dir;
    const std::string path = dir.path + "/ps-0.shard";
    const DataChunks d = busy({600, 6, 2});
    struct Damage {
        const char* what;
        void (*edit)(std::vector<NamedTensor>&);
        const char* says;
    };
    const Damage damages[] = {
        {"0 chunks",
         [](std::vector<NamedTensor>& t) {
             for (int k = 8; k < 12; ++k) t[t.size() - 3].data[k] = 0.0f;
         },
         "0 chunks"},
        {"a digit that is not an integer", [](std::vector<NamedTensor>& t) { t[t.size() - 3].data[5] = 0.5f; },
         "header digits"},
        {"an open epoch row of the wrong width",
         [](std::vector<NamedTensor>& t) {
             auto& open = t.back();
             open.shape[1] += 1;
             open.data.resize(open.shape[0] * open.shape[1], 0.0f);
         },
         "shape of the open epochs"},
        {"more chunks done than the plan has", [](std::vector<NamedTensor>& t) { t.back().data[4] = 0xFF; },
         "not a valid data chunk state"},
        {"the tensors renamed", [](std::vector<NamedTensor>& t) { t[t.size() - 3].name = "data_chunks/head"; },
         "wrong number of tensors"},
    };
    for (const Damage& damage : damages) {
        INFO(damage.what);
        save_shard(path, &d);
        rewrite(path, damage.edit);
        ShardState b = blank_shard();
        step_once(b);
        b.apply(ramps(b, 0.2f).spans());  // step 2: not the file's 1
        std::optional<DataChunks> got;
        auto refused = b.load(path, &got);
        REQUIRE_FALSE(refused);
        CHECK_THAT(refused.error().message, Catch::Contains(path));
        CHECK_THAT(refused.error().message, Catch::Contains(damage.says));
        CHECK(b.initialized());  // checked before anything changed
        CHECK(b.step() == 2);
        CHECK_FALSE(got.has_value());
    }
    // Truncated inside the section (the file's end and CRCs are gone): refused at open, naming the file.
    save_shard(path, &d);
    fs::resize_file(path, fs::file_size(path) - 40);
    ShardState b = blank_shard();
    auto truncated = b.load(path);
    REQUIRE_FALSE(truncated);
    CHECK_THAT(truncated.error().message, Catch::Contains(path));
    CHECK_FALSE(b.initialized());
}

TEST_CASE("standby: psd 0 started on its shard file goes on with the dispenser's epoch",
          "[psd][standby][data_chunks]") {
    TempDir model;
    auto o = test::base_options(1);
    o.standby = true;
    o.model_dir = model.path;
    const wire::ChunkRequest want{100, 10, 5, true, {}};
    std::set<std::uint32_t> done_before;
    wire::ChunkRef in_flight;
    {
        test::Cluster first(1, o);
        PsClient chief(first.client_options(0, test::small_model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(sgd(), test::ramp(chief.layout().total, 0.5f, -0.2f)));
        wire::ChunkRequest r = want;  // epoch 0 complete, 3 chunks of epoch 1 done, a 4th in flight
        for (int k = 0; k < 14; ++k) {
            auto g = chief.chunk(r);
            REQUIRE(g);
            r.done = {g->id};
            if (g->id.epoch == 1) done_before.insert(g->id.chunk);
            in_flight = g->id;
        }
        done_before.erase(in_flight.chunk);
        REQUIRE(in_flight.epoch == 1);
    }  // stopped: the standby psd saves ps-0.shard
    REQUIRE(fs::exists(model.path + "/ps-0.shard"));
    {
        test::Cluster again(1, o);
        PsClient chief(again.client_options(0, test::small_model()));
        REQUIRE(chief.hello());  // loads the shard file, and with it the dispenser
        CHECK(chief.servers_initialized());
        REQUIRE(chief.init_restored(sgd()));
        wire::ChunkRequest r = want;
        std::set<std::uint32_t> after;
        for (int k = 0; k < 7; ++k) {
            auto g = chief.chunk(r);
            REQUIRE(g);
            CHECK(g->id.epoch == 1);  // not epoch 0
            after.insert(g->id.chunk);
            r.done = {g->id};
        }
        CHECK(after.count(in_flight.chunk) == 1);  // leased again
        for (auto c : done_before) CHECK(after.count(c) == 0);
        auto g = chief.chunk(r);
        REQUIRE(g);
        CHECK(g->id.epoch == 2);
        auto stats = chief.stats(0);
        REQUIRE(stats);
        CHECK((*stats)["data_chunks"]["epochs_complete"] == 2);
        CHECK((*stats)["data_chunks"]["epochs_inexact"] == 0);
    }
    // A shard file without the section (an older psrun's): it loads, and the data starts at epoch 0.
    rewrite(model.path + "/ps-0.shard", [](std::vector<NamedTensor>& t) {
        t.resize(t.size() - kDataChunksTensors);
        t[0].data[0] = 8.0f;
    });
    test::Cluster old(1, o);
    PsClient chief(old.client_options(0, test::small_model()));
    REQUIRE(chief.hello());
    CHECK(chief.servers_initialized());
    auto g = chief.chunk(want);
    REQUIRE(g);
    CHECK(g->id.epoch == 0);
}

}  // namespace shard_file_chunks_test
