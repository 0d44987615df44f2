// Sparse tables in checkpoints (psd/shard_checkpoint_rows.h): written shard by shard, restored
// exactly (rows, Adam slots, update counts), re-sharded into another shard count, refused when
// damaged or written for another model; the standby shard file keeps them too.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <numeric>

#include <nlohmann/json.hpp>

#include "common/checkpoint_params.h"
#include "common/row_delta.h"
#include "common/row_init.h"
#include "common/tensor_file_stream.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::adam;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;

namespace sparse_checkpoint_test {

namespace {

constexpr std::uint32_t kRows = 997, kWidth = 4;  // 997: shards hold unequal row counts

std::vector<TensorSpec> model(bool sparse = true) { return psrun::test::sparse_model(kRows, kWidth, sparse); }

// Step s of a fixed run: the dense gradient and 60 rows (some repeated).
void step(PsClient& client, int s) {
    const std::size_t n = client.layout().total;
    std::vector<std::uint32_t> ids;
    for (int i = 0; i < 60; ++i) ids.push_back(static_cast<std::uint32_t>((i * 61 + s * 17) % kRows));
    const auto values = ramp(ids.size() * kWidth, 0.2f * static_cast<float>(s + 1), -0.05f);
    const RowGrads rows{1, ids, values};
    REQUIRE(client.exchange(Exchange{.grads = ramp(n, 0.1f, static_cast<float>(s)),
                                     .step = static_cast<std::uint64_t>(s),
                                     .row_grads = {&rows, 1}}));
}

std::vector<float> table(PsClient& client) {
    std::vector<std::uint32_t> ids(kRows);
    std::iota(ids.begin(), ids.end(), 0u);
    const RowRequest request{1, ids};
    PulledRows rows;
    ParamFrames dense;
    REQUIRE(client.exchange(Exchange{.pulls = {&request, 1}, .params = &dense, .rows = &rows}));
    std::vector<float> out(rows.rows(0).begin(), rows.rows(0).end());
    std::vector<float> params(client.layout().total);
    dense.copy_to(params, client.layout());
    out.insert(out.end(), params.begin(), params.end());
    return out;
}

}  // namespace

TEST_CASE("a checkpoint restores sparse tables exactly, into the same or another shard count",
          "[psd][sparse][checkpoint]") {
    const std::string dir = psrun::test::make_temp_dir();
    std::vector<float> reference;
    {
        Cluster cluster(2, base_options(1));
        PsClient chief(cluster.client_options(0, model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(adam(0.01f), ramp(chief.layout().total, 0.5f)));
        for (int s = 0; s < 3; ++s) step(chief, s);
        REQUIRE(chief.save(3, dir));
        for (int s = 3; s < 5; ++s) step(chief, s);  // the run goes on: the reference
        reference = table(chief);
    }
    // Each file holds its shard's rows only, as a [rows, width] piece with Adam's two slots, by
    // blocks: the 16-row blocks holding a row the steps created (common/row_delta.h), and the
    // shard's row count; the others hold their initial values.
    for (std::uint32_t i = 0; i < 2; ++i) {
        auto file = TensorFileReader::open(dir + "/ps-" + std::to_string(i) + "-of-2.tensors");
        REQUIRE(file);
        std::size_t pieces = 0;
        std::uint64_t listed = 0;
        for (std::size_t e = 0; e < file->tensors().size(); ++e) {
            const auto& t = file->tensors()[e];
            RowPieceName name;
            if (!parse_row_piece_name(t.name, name)) continue;
            ++pieces;
            CHECK(name.shard == i);
            if (name.part == "blocks") {
                std::vector<float> blocks(t.count);
                REQUIRE(file->read(e, 0, blocks));
                const auto rows = decode_row_delta_rows(blocks, i == 0 ? 499u : 498u, "test");
                REQUIRE(rows);
                listed = rows->size();
            } else if (name.part == "rows") {
                std::vector<float> count(2);
                REQUIRE(file->read(e, 0, count));
                CHECK(decode_row_count(count, "test").value() == (i == 0 ? 499u : 498u));
            } else if (name.part != "state") {
                CHECK(t.shape[1] == kWidth);
                CHECK(t.shape[0] < (i == 0 ? 499u : 498u));
            }
        }
        CHECK(pieces == 6);  // param, slot0, slot1, state, blocks, rows
        CHECK(listed > 0);
        for (const auto& t : file->tensors())
            if (RowPieceName n; parse_row_piece_name(t.name, n) && n.part == "param") CHECK(t.shape[0] == listed);
    }
    for (std::uint32_t shards : {2u, 3u, 1u}) {
        Cluster cluster(shards, base_options(1));
        PsClient chief(cluster.client_options(0, model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.restore(adam(0.01f, 0, 3), dir));
        for (int s = 3; s < 5; ++s) step(chief, s);
        INFO("restored into " << shards << " shards");
        const auto got = table(chief);
        std::size_t mismatches = 0;
        for (std::size_t i = 0; i < got.size(); ++i) mismatches += got[i] != reference[i];
        CHECK(mismatches == 0);
    }
    // The evaluator's view (dense tensors only) skips the tables' pieces.
    {
        std::ofstream manifest(dir + "/manifest.json");
        manifest << R"({"step": 3, "files": ["ps-0-of-2.tensors", "ps-1-of-2.tensors"]})";
    }
    auto dense = load_checkpoint_parameters(dir, model());
    REQUIRE(dense);
    CHECK(dense->values.size() == 40);
    std::filesystem::remove_all(dir);
}

TEST_CASE("a damaged or foreign sparse checkpoint is refused and the refusing shard keeps its rows",
          "[psd][sparse][checkpoint]") {
    const std::string dir = psrun::test::make_temp_dir();
    Cluster cluster(2, base_options(1));
    PsClient chief(cluster.client_options(0, model()));
    REQUIRE(chief.hello());
    REQUIRE(chief.init(adam(0.01f), ramp(chief.layout().total, 0.5f)));
    step(chief, 0);
    REQUIRE(chief.save(1, dir));
    step(chief, 1);
    const auto before = table(chief);

    // A model that has the table dense is refused, naming it.
    {
        Cluster other(1, base_options(1));
        PsClient dense_chief(other.client_options(0, model(false)));
        REQUIRE(dense_chief.hello());
        auto refused = dense_chief.restore(adam(0.01f, 0, 1), dir);
        REQUIRE_FALSE(refused);
        CHECK_THAT(refused.error().message, Catch::Contains("holds 'emb' as a sparse table"));
    }
    // One flipped byte inside shard 1's rows: its CRC fails, and no shard changes.
    const std::string path = dir + "/ps-1-of-2.tensors";
    {
        auto file = TensorFileReader::open(path);
        REQUIRE(file);
        std::uint64_t at = 0;
        for (const auto& t : file->tensors())
            if (t.name == "emb@1%2/param") at = t.data_offset + 40;
        REQUIRE(at > 0);
        std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
        f.seekg(static_cast<std::streamoff>(at));
        const char old = static_cast<char>(f.get());
        f.seekp(static_cast<std::streamoff>(at));
        f.put(static_cast<char>(old ^ 0x10));
    }
    // Shard 0 reads only its own file and restores; shard 1 refuses and keeps every row it holds.
    auto shard1_rows_kept = [&] {
        const auto now = table(chief);
        std::size_t changed = 0;
        for (std::uint32_t r = 1; r < kRows; r += 2)
            for (std::uint32_t c = 0; c < kWidth; ++c) changed += now[r * kWidth + c] != before[r * kWidth + c];
        return changed == 0;
    };
    auto damaged = chief.restore(adam(0.01f, 0, 1), dir);
    REQUIRE_FALSE(damaged);
    CHECK_THAT(damaged.error().message, Catch::Contains("ps-1-of-2.tensors") && Catch::Contains("CRC32C"));
    CHECK(shard1_rows_kept());
    // A missing part of the table is refused too.
    std::filesystem::remove(path);
    auto missing = chief.restore(adam(0.01f, 0, 1), dir);
    REQUIRE_FALSE(missing);
    CHECK_THAT(missing.error().message, Catch::Contains("holds 1 of the 2 parts of the sparse table 'emb'"));
    CHECK(shard1_rows_kept());
    std::filesystem::remove_all(dir);
}

TEST_CASE("the standby shard file keeps the shard's rows, slots and update count", "[psd][sparse][shard]") {
    const auto tensors = model();
    const auto layout = *compute_layout(tensors, 3);
    const std::string dir = psrun::test::make_temp_dir();
    psd::ShardState a(layout, 2, tensors);
    std::vector<std::vector<float>> init;
    for (auto id : a.slice_ids()) init.push_back(ramp(layout.slices[id].length, 0.5f));
    a.init(adam(0.01f), std::vector<std::span<const float>>(init.begin(), init.end()));
    std::vector<std::span<const float>> no_dense(a.slice_ids().size());
    for (std::size_t k = 0; k < no_dense.size(); ++k) no_dense[k] = init[k];
    const std::vector<std::uint32_t> ids{2, 5, 992};  // rows of shard 2 of 3
    const auto values = ramp(ids.size() * kWidth, 0.7f);
    const psd::RowSlice rows{0, ids, values};
    a.apply(no_dense, nullptr, {}, {&rows, 1});
    REQUIRE(a.save(dir + "/ps-2.shard"));
    psd::ShardState b(layout, 2, tensors);
    REQUIRE(b.load(dir + "/ps-2.shard"));
    CHECK(b.rows().updates(0) == 1);
    a.apply(no_dense, nullptr, {}, {&rows, 1});
    b.apply(no_dense, nullptr, {}, {&rows, 1});
    const auto va = a.rows().values(0), vb = b.rows().values(0);
    CHECK(std::equal(va.begin(), va.end(), vb.begin(), vb.end()));
    CHECK(a.rows().local_rows(0) == 332);  // rows 2, 5, ..., 995
    std::filesystem::remove_all(dir);
}

TEST_CASE("a whole checkpoint by blocks restores and reads as one holding every row would",
          "[psd][sparse][checkpoint]") {
    const std::string root = psrun::test::make_temp_dir();
    const std::string by_blocks = root + "/blocks", plain = root + "/plain";
    for (const auto& d : {by_blocks, plain}) std::filesystem::create_directories(d);
    {
        Cluster cluster(2, base_options(1));
        PsClient chief(cluster.client_options(0, model()));
        REQUIRE(chief.hello());
        REQUIRE(chief.init(adam(0.01f), ramp(chief.layout().total, 0.5f)));
        for (int s = 0; s < 3; ++s) step(chief, s);
        REQUIRE(chief.save(3, by_blocks));
        (void)table(chief);  // pulls every row: all created (their initial values), none changed
        REQUIRE(chief.save(3, plain));
    }
    auto parts = [](const std::string& dir, const std::string& part) {
        std::size_t n = 0;
        for (std::uint32_t i = 0; i < 2; ++i) {
            auto file = TensorFileReader::open(dir + "/ps-" + std::to_string(i) + "-of-2.tensors");
            REQUIRE(file);
            for (const auto& t : file->tensors()) n += t.name.ends_with("/" + part);
        }
        return n;
    };
    CHECK(parts(by_blocks, "blocks") == 2);
    CHECK(parts(by_blocks, "rows") == 2);
    CHECK(parts(plain, "blocks") == 0);
    // Restored into 2 and 3 shards, with the same optimizer and with another (fresh slots:
    // Adagrad's initial accumulator on the rows listed and on those created later), then trained on.
    for (std::uint32_t shards : {2u, 3u}) {
        for (const bool same : {true, false}) {
            INFO(shards << " shards, " << (same ? "the same optimizer" : "another optimizer"));
            wire::InitConfig init = adam(0.01f, 0, 3);
            if (!same)
                init.optimizer =
                    OptimizerConfig{.kind = OptimizerKind::kAdagrad, .learning_rate = 0.1f, .adagrad_initial = 0.1f};
            std::vector<std::vector<float>> got;
            for (const auto& dir : {by_blocks, plain}) {
                Cluster cluster(shards, base_options(1));
                PsClient chief(cluster.client_options(0, model()));
                REQUIRE(chief.hello());
                REQUIRE(chief.restore(init, dir));
                for (int s = 3; s < 6; ++s) step(chief, s);
                got.push_back(table(chief));
            }
            std::size_t mismatches = 0;
            for (std::size_t i = 0; i < got[0].size(); ++i) mismatches += got[0][i] != got[1][i];
            CHECK(mismatches == 0);
        }
    }
    // The evaluator's and export's view: the rows it omits drawn from the initializer the manifest
    // records; without one it is refused, naming the table.
    std::vector<std::vector<float>> dense;
    for (const auto& dir : {by_blocks, plain}) {
        nlohmann::json manifest = {{"step", 3}, {"files", {"ps-0-of-2.tensors", "ps-1-of-2.tensors"}}};
        manifest["layout"]["tensors"] = {{{"name", "emb"}, {"row_init", row_init_to_json(model()[1].row_init)}}};
        std::ofstream(dir + "/manifest.json") << manifest.dump();
        auto read = load_checkpoint_parameters(dir, model(false));
        REQUIRE(read);
        dense.push_back(read->values);
    }
    CHECK(dense[0] == dense[1]);
    std::ofstream(by_blocks + "/manifest.json")
        << R"({"step": 3, "files": ["ps-0-of-2.tensors", "ps-1-of-2.tensors"]})";
    auto refused = load_checkpoint_parameters(by_blocks, model(false));
    REQUIRE_FALSE(refused);
    CHECK_THAT(refused.error().message, Catch::Contains("'emb'") && Catch::Contains("initializer"));
    std::filesystem::remove_all(root);
}

}  // namespace sparse_checkpoint_test
