// Differential checkpoints of sparse tables (common/row_delta.h, psd --checkpoint-full-every):
// a checkpoint after a committed whole one holds only the tables' blocks changed since, restores
// exactly (base + delta) into the same or another shard count and reads back as a dense table;
// the chief's store keeps the base a kept checkpoint builds on; and psd writes whole where it must.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "common/checkpoint_params.h"
#include "common/checkpoint_store.h"
#include "common/checkpointer.h"
#include "common/row_delta.h"
#include "common/row_init.h"
#include "common/tensor_file_stream.h"
#include "test/integration/integration_util.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::adam;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;

namespace sparse_delta_checkpoint_test {

namespace {

constexpr std::uint32_t kRows = 4001, kWidth = 4;  // 4001: shards hold unequal row counts, a short last block

std::vector<TensorSpec> model(bool sparse = true) { return psrun::test::sparse_model(kRows, kWidth, sparse); }

// Step s: the dense gradient and 40 rows in a narrow band of the table (most blocks untouched),
// the table's last row among them at step 4.
void step(PsClient& client, int s) {
    std::vector<std::uint32_t> ids;
    for (int i = 0; i < 40; ++i) ids.push_back(static_cast<std::uint32_t>((i * 7 + s * 3) % 600));
    if (s == 4) ids.push_back(kRows - 1);
    std::sort(ids.begin(), ids.end());
    ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
    const auto values = ramp(ids.size() * kWidth, 0.2f * static_cast<float>(s + 1), -0.05f);
    const RowGrads rows{1, ids, values};
    REQUIRE(client.exchange(Exchange{.grads = ramp(client.layout().total, 0.1f, static_cast<float>(s)),
                                     .step = static_cast<std::uint64_t>(s),
                                     .row_grads = {&rows, 1}}));
}

// The table's rows (a lookup: nothing created), then the dense parameters.
std::vector<float> table(PsClient& client) {
    std::vector<std::uint32_t> ids(kRows);
    std::iota(ids.begin(), ids.end(), 0u);
    const RowRequest request{1, ids};
    PulledRows rows;
    ParamFrames dense;
    REQUIRE(client.exchange(Exchange{.pulls = {&request, 1}, .params = &dense, .rows = &rows, .lookup = true}));
    std::vector<float> out(rows.rows(0).begin(), rows.rows(0).end());
    std::vector<float> params(client.layout().total);
    dense.copy_to(params, client.layout());
    out.insert(out.end(), params.begin(), params.end());
    return out;
}

// The rows of each row piece in `dir`'s shard files, and whether any is differential.
struct Pieces {
    std::uint64_t rows = 0;
    bool differential = false;
};
Pieces pieces(const std::string& dir, std::uint32_t shards) {
    Pieces out;
    for (std::uint32_t i = 0; i < shards; ++i) {
        auto file =
            TensorFileReader::open(dir + "/ps-" + std::to_string(i) + "-of-" + std::to_string(shards) + ".tensors");
        REQUIRE(file);
        for (const auto& t : file->tensors()) {
            RowPieceName name;
            if (!parse_row_piece_name(t.name, name)) continue;
            if (name.part == "param") out.rows += t.shape[0];
            out.differential = out.differential || name.part == "base";
        }
    }
    return out;
}

void commit(const std::string& dir) {  // what the chief's rename does, for psd: the manifest
    std::ofstream(dir + "/manifest.json") << R"({"step": 0, "files": []})";
}

std::size_t mismatches(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    std::size_t n = 0;
    for (std::size_t i = 0; i < a.size(); ++i) n += a[i] != b[i];
    return n;
}

}  // namespace

TEST_CASE("a differential checkpoint holds the changed blocks and restores exactly, into any shard count",
          "[psd][sparse][checkpoint]") {
    const std::string root = psrun::test::make_temp_dir();
    const std::string full = root + "/" + checkpoint_dir_name(3), delta = root + "/" + checkpoint_dir_name(6);
    std::filesystem::create_directories(full);
    std::filesystem::create_directories(delta);
    std::vector<float> at6, reference;
    for (std::string writer : {"thread", "fork", "loop"}) {
        INFO("writer " << writer);
        auto options = base_options(1);
        using Writer = psd::ServerOptions::CheckpointWriter;
        options.checkpoint_writer = writer == "thread" ? Writer::kThread
                                    : writer == "fork" ? Writer::kFork
                                                       : Writer::kLoop;
        std::filesystem::remove(full + "/manifest.json");
        Cluster cluster(2, options);
        PsClient chief(cluster.client_options(0, model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(adam(0.01f, 1000), ramp(chief.layout().total, 0.5f)));
        for (int s = 0; s < 3; ++s) step(chief, s);
        REQUIRE(chief.save(3, full));
        CHECK(pieces(full, 2).rows < kRows);  // whole, by blocks: those holding rows the steps created
        CHECK_FALSE(pieces(full, 2).differential);
        commit(full);
        for (int s = 3; s < 6; ++s) step(chief, s);
        REQUIRE(chief.save(6, delta));
        const Pieces written = pieces(delta, 2);
        CHECK(written.differential);
        CHECK(written.rows < kRows / 2);  // rows [0, 600) and the last one, in blocks of 16 per shard
        CHECK(written.rows >= 300);
        const auto now = table(chief);
        if (!at6.empty()) CHECK(mismatches(now, at6) == 0);  // the writers agree
        at6 = now;
        for (int s = 6; s < 8; ++s) step(chief, s);
        reference = table(chief);
    }
    for (std::uint32_t shards : {2u, 3u, 1u}) {
        INFO("restored into " << shards << " shards");
        Cluster cluster(shards, base_options(1));
        PsClient chief(cluster.client_options(0, model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.restore(adam(0.01f, 1000, 6), delta));
        CHECK(mismatches(table(chief), at6) == 0);
        for (int s = 6; s < 8; ++s) step(chief, s);  // Adam's update counts came back too
        CHECK(mismatches(table(chief), reference) == 0);
    }
    // The evaluator's and export's view: the table read as a dense tensor, base and delta together.
    commit(delta);
    // (The rows its base omits: their initial values, from the initializer the manifest records.)
    nlohmann::json manifest = {{"step", 6}, {"files", {"ps-0-of-2.tensors", "ps-1-of-2.tensors"}}};
    manifest["layout"]["tensors"] = {{{"name", "emb"}, {"row_init", row_init_to_json(model()[1].row_init)}}};
    std::ofstream(delta + "/manifest.json") << manifest.dump();
    auto dense = load_checkpoint_parameters(delta, model(false));
    REQUIRE(dense);
    std::vector<float> rows_then_dense(dense->values.begin() + 40, dense->values.end());
    rows_then_dense.insert(rows_then_dense.end(), dense->values.begin(), dense->values.begin() + 40);
    CHECK(mismatches(rows_then_dense, at6) == 0);
    // Without its base, neither reads.
    std::filesystem::rename(full, root + "/gone");
    Cluster cluster(2, base_options(1));
    PsClient chief(cluster.client_options(0, model()));
    REQUIRE(chief.hello());
    auto refused = chief.restore(adam(0.01f, 1000, 6), delta);
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("builds on"));
    CHECK_FALSE(load_checkpoint_parameters(delta, model(false)));
    std::filesystem::remove_all(root);
}

TEST_CASE("psd writes whole when the base is not committed, every Nth time, and after a restore",
          "[psd][sparse][checkpoint]") {
    const std::string root = psrun::test::make_temp_dir();
    auto options = base_options(1);
    options.checkpoint_full_every = 3;
    Cluster cluster(1, options);
    PsClient chief(cluster.client_options(0, model()));
    REQUIRE(chief.hello());
    REQUIRE(chief.init(adam(0.01f, 1000), ramp(chief.layout().total, 0.5f)));
    std::vector<bool> differential;
    for (int k = 1; k <= 7; ++k) {
        step(chief, k);
        const std::string dir = root + "/" + checkpoint_dir_name(k);
        std::filesystem::create_directories(dir);
        REQUIRE(chief.save(static_cast<std::uint64_t>(k), dir));
        differential.push_back(pieces(dir, 1).differential);
        if (k != 1) commit(dir);  // the first is never committed: the second cannot build on it
    }
    // whole (not committed), whole, delta, delta, whole (every 3rd), delta, delta
    CHECK(differential == std::vector<bool>{false, false, true, true, false, true, true});
    // A restored shard has no base of its own: its next checkpoint is whole.
    REQUIRE(chief.restore(adam(0.01f, 1000, 7), root + "/" + checkpoint_dir_name(7)));
    step(chief, 8);
    const std::string dir = root + "/" + checkpoint_dir_name(8);
    std::filesystem::create_directories(dir);
    REQUIRE(chief.save(8, dir));
    CHECK_FALSE(pieces(dir, 1).differential);
    std::filesystem::remove_all(root);
}

TEST_CASE("the chief keeps the whole checkpoint its newest build on, and restores through it",
          "[psd][sparse][checkpoint]") {
    psrun::test::TempModelDir model_dir;
    CheckpointerOptions o;
    o.model_dir = model_dir.path;
    o.keep = 1;
    o.init = adam(0.01f, 1000);
    std::vector<float> reference;
    {
        Cluster cluster(2, base_options(1));
        PsClient chief(cluster.client_options(0, model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(adam(0.01f, 1000), ramp(chief.layout().total, 0.5f)));
        Checkpointer ckpt(o);
        std::vector<std::vector<std::int64_t>> kept;
        for (int s = 0; s < 9; ++s) {
            step(chief, s);
            if (s % 3 == 2) {
                REQUIRE(ckpt.save(chief, static_cast<std::uint64_t>(s + 1)));
                kept.emplace_back();
                for (const auto& c : CheckpointStore(o.model_dir, 1).list()) kept.back().push_back(c.step);
            }
        }
        // 3 whole; 6 builds on 3, which stays; 9 too, and 6 goes (keep 1)
        CHECK(kept == std::vector<std::vector<std::int64_t>>{{3}, {3, 6}, {3, 9}});
        auto bases = row_delta_bases(o.model_dir + "/" + checkpoint_dir_name(9));
        REQUIRE(bases);
        CHECK(*bases == std::vector<std::uint64_t>{3});
        reference = table(chief);
    }
    Cluster cluster(3, base_options(1));
    PsClient chief(cluster.client_options(0, model()));
    REQUIRE(chief.hello());
    Checkpointer loader(o);
    auto restored = loader.restore(chief);
    REQUIRE(restored);
    REQUIRE(*restored);
    CHECK((*restored)->step == 9);
    CHECK(mismatches(table(chief), reference) == 0);
    // A damaged base makes its delta invalid: the store finds no valid checkpoint then.
    const std::string base_file = o.model_dir + "/" + checkpoint_dir_name(3) + "/ps-0-of-2.tensors";
    psrun::test::flip_byte(base_file, static_cast<std::streamoff>(std::filesystem::file_size(base_file) / 2));
    std::vector<std::string> warnings;
    CHECK_FALSE(CheckpointStore(o.model_dir, 1).latest_valid(&warnings));
    REQUIRE_FALSE(warnings.empty());
    CHECK_THAT(warnings.front(), Catch::Contains("builds on"));
}

}  // namespace sparse_delta_checkpoint_test
