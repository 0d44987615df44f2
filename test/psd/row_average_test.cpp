// The moving average of the sparse tables' rows (--ema-decay, psd/row_store.h): kept lazily per
// row, it equals the dense average a dense table of the same values gets (rows never pushed,
// pushed once early or late, pushed every update, created by a pull mid-run), by hand in double
// too; saved as "<table>@<s>%<K>/ema" pieces, assembled by load_checkpoint_parameters(kAverage)
// and restored (also into another shard count) so that it goes on where it was.
#include <catch2/catch.hpp>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <numeric>

#include "common/checkpoint_params.h"
#include "common/row_init.h"
#include "common/tensor_file_stream.h"
#include "psd/shard_state.h"
#include "test/psd/ps_fixture.h"

using namespace psrun;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;

namespace {

constexpr std::uint32_t kAvgRows = 97, kAvgWidth = 4;
constexpr float kAvgDecay = 0.9f;
const RowInit kAvgInit{RowInitKind::kNormal, 0.5f, 5};

// fc/w, then the table: sparse (rows) or dense with the same initial values.
std::vector<TensorSpec> avg_model(bool sparse) {
    std::vector<TensorSpec> t = {{"fc/w", {8, 5}}, {"emb", {kAvgRows, kAvgWidth}}};
    if (sparse) {
        t[1].kind = TensorKind::kRows;
        t[1].row_init = kAvgInit;
    }
    return t;
}

std::vector<float> initial_table() {
    std::vector<float> out(std::size_t{kAvgRows} * kAvgWidth);
    for (std::uint32_t r = 0; r < kAvgRows; ++r)
        fill_row(kAvgInit, r, std::span<float>(out.data() + r * kAvgWidth, kAvgWidth));
    return out;
}

// Rows pushed at update s (0-based): row 0 always, row 1 at the first, row 2 at the third, row 5
// at the second and sixth, and a few others; ascending, unique.
std::vector<std::uint32_t> pushed_rows(int s) {
    std::vector<std::uint32_t> ids{0};
    if (s == 0) ids.push_back(1);
    if (s == 2) ids.push_back(2);
    if (s == 1 || s == 5) ids.push_back(5);
    ids.push_back(20 + static_cast<std::uint32_t>(s) * 7);
    ids.push_back(60 + static_cast<std::uint32_t>(s % 3) * 11);
    return ids;
}

std::vector<float> row_grads(const std::vector<std::uint32_t>& ids, int s) {
    return ramp(ids.size() * kAvgWidth, 0.3f * static_cast<float>(s + 1), -0.07f);
}

wire::InitConfig sgd_average(std::uint64_t start = 0) {
    wire::InitConfig c;
    c.optimizer = OptimizerConfig{.kind = OptimizerKind::kSgd, .learning_rate = 0.1f};
    c.optimizer.ema_decay = kAvgDecay;
    c.start_step = start;
    return c;
}

// One update of a run: the dense gradient of fc/w, and the table's rows (sparse) or the same
// gradient scattered into the dense table (zero elsewhere: SGD leaves those rows as they are).
void avg_step(PsClient& client, bool sparse, int s) {
    const std::size_t n = client.layout().total;
    const auto ids = pushed_rows(s);
    const auto values = row_grads(ids, s);
    std::vector<float> grads = ramp(40, 0.1f, static_cast<float>(s));
    if (sparse) {
        const RowGrads rows{1, ids, values};
        REQUIRE(
            client.exchange(Exchange{.grads = grads, .step = static_cast<std::uint64_t>(s), .row_grads = {&rows, 1}}));
        return;
    }
    grads.resize(n, 0.0f);
    for (std::size_t i = 0; i < ids.size(); ++i)
        for (std::uint32_t c = 0; c < kAvgWidth; ++c) grads[40 + ids[i] * kAvgWidth + c] = values[i * kAvgWidth + c];
    REQUIRE(client.exchange(Exchange{.grads = grads, .step = static_cast<std::uint64_t>(s)}));
}

double worst_difference(const std::vector<float>& a, const std::vector<float>& b) {
    REQUIRE(a.size() == b.size());
    double worst = 0;
    for (std::size_t i = 0; i < a.size(); ++i) worst = std::max(worst, std::abs(double(a[i]) - double(b[i])));
    return worst;
}

}  // namespace

TEST_CASE("a sparse table's row average equals the dense average of the same tensor", "[psd][sparse][ema]") {
    // One ShardState holding the table twice: as a dense tensor and as rows, updated alike.
    std::vector<TensorSpec> tensors = {{"dense", {kAvgRows, kAvgWidth}}, {"emb", {kAvgRows, kAvgWidth}}};
    tensors[1].kind = TensorKind::kRows;
    tensors[1].row_init = kAvgInit;
    const auto layout = *compute_layout(tensors, 1);
    psd::ShardState shard(layout, 0, tensors);
    REQUIRE(shard.slice_ids().size() == 1);
    const auto initial = initial_table();
    shard.init(sgd_average(), {std::span<const float>(initial)});
    const int kUpdates = 8;
    std::vector<std::vector<float>> trajectory;  // the dense table after each update
    for (int s = 0; s < kUpdates; ++s) {
        const auto ids = pushed_rows(s % 6);
        const auto values = row_grads(ids, s);
        std::vector<float> dense(initial.size(), 0.0f);
        for (std::size_t i = 0; i < ids.size(); ++i)
            for (std::uint32_t c = 0; c < kAvgWidth; ++c) dense[ids[i] * kAvgWidth + c] = values[i * kAvgWidth + c];
        const psd::RowSlice rows{0, ids, values};
        shard.apply({std::span<const float>(dense)}, nullptr, {}, {&rows, 1});
        if (s == 3) {  // row 90 created by a pull mid-run: its initial values all along
            std::vector<std::uint32_t> pull{90};
            std::vector<float> out(kAvgWidth);
            shard.rows().gather(0, pull, out.data());
        }
        const auto p = shard.param_slice(0);
        trajectory.emplace_back(p.begin(), p.end());
    }
    CHECK(shard.rows().rows_created() < kAvgRows);  // lazily: most rows were never touched
    CHECK(shard.rows().average_floats() == shard.rows().floats());
    shard.rows().materialize(nullptr);  // what a checkpoint does first: every row's average current
    const auto sparse_values = shard.rows().values(0);
    const auto sparse_average = shard.rows().average(0);
    const auto dense_average = shard.average().slice(0);
    CHECK(std::vector<float>(sparse_values.begin(), sparse_values.end()) == trajectory.back());
    const std::vector<float> got(sparse_average.begin(), sparse_average.end());
    const std::vector<float> want(dense_average.begin(), dense_average.end());
    CHECK(worst_difference(got, want) < 1e-6);
    // By hand in double: the first update copied, then e = D e + (1 - D) p.
    std::vector<double> hand(trajectory[0].begin(), trajectory[0].end());
    for (std::size_t s = 1; s < trajectory.size(); ++s)
        for (std::size_t i = 0; i < hand.size(); ++i)
            hand[i] = kAvgDecay * hand[i] + (1.0 - kAvgDecay) * trajectory[s][i];
    double worst = 0;
    for (std::size_t i = 0; i < hand.size(); ++i) worst = std::max(worst, std::abs(hand[i] - double(got[i])));
    CHECK(worst < 1e-6);
    const auto row = [&](const std::vector<float>& v, std::uint32_t r) {
        return std::vector<float>(v.begin() + r * kAvgWidth, v.begin() + (r + 1) * kAvgWidth);
    };
    CHECK(row(got, 3) == row(initial, 3));            // never pushed: its initial values, exactly
    CHECK(row(got, 90) == row(initial, 90));          // pulled, never pushed
    CHECK(row(got, 1) != row(trajectory.back(), 1));  // pushed at the first update only: not yet its value
    CHECK(row(got, 0) != row(trajectory.back(), 0));
}

TEST_CASE("the rows' average is checkpointed, assembled for --ema and restored into another shard count",
          "[psd][sparse][ema][checkpoint]") {
    const std::string sparse_dir = psrun::test::make_temp_dir(), dense_dir = psrun::test::make_temp_dir();
    auto write_manifest = [](const std::string& dir, std::uint32_t shards, int step) {
        std::ofstream manifest(dir + "/manifest.json");
        manifest << R"({"step": )" << step << R"(, "files": [)";
        for (std::uint32_t i = 0; i < shards; ++i)
            manifest << (i ? ", " : "") << "\"ps-" << i << "-of-" << shards << ".tensors\"";
        manifest << "]}";
    };
    auto run = [&](bool sparse, const std::string& dir) {
        Cluster cluster(2, base_options(1));
        PsClient chief(cluster.client_options(0, avg_model(sparse)));
        REQUIRE(chief.hello());
        std::vector<float> params = ramp(40, 0.5f);
        if (!sparse) {
            const auto table = initial_table();
            params.insert(params.end(), table.begin(), table.end());
        }
        REQUIRE(chief.init(sgd_average(), params));
        for (int s = 0; s < 4; ++s) avg_step(chief, sparse, s);
        REQUIRE(chief.save(4, dir));
        write_manifest(dir, 2, 4);
    };
    run(true, sparse_dir);
    run(false, dense_dir);
    for (std::uint32_t i = 0; i < 2; ++i) {  // an "ema" piece beside each shard's "param" piece
        auto file = TensorFileReader::open(sparse_dir + "/ps-" + std::to_string(i) + "-of-2.tensors");
        REQUIRE(file);
        bool ema = false;
        for (const auto& t : file->tensors()) ema = ema || t.name == row_piece_base_name("emb", i, 2) + "/ema";
        CHECK(ema);
    }
    auto sparse_average = load_checkpoint_parameters(sparse_dir, avg_model(false), CheckpointValues::kAverage);
    auto dense_average = load_checkpoint_parameters(dense_dir, avg_model(false), CheckpointValues::kAverage);
    REQUIRE(sparse_average);
    REQUIRE(dense_average);
    CHECK(worst_difference(sparse_average->values, dense_average->values) < 1e-6);
    auto sparse_params = load_checkpoint_parameters(sparse_dir, avg_model(false));
    REQUIRE(sparse_params);
    CHECK(worst_difference(sparse_params->values, sparse_average->values) > 1e-3);

    // Restored into 3 shards, two more updates each: the averages go on from the saved ones.
    auto resume = [&](bool sparse, const std::string& dir) {
        Cluster cluster(3, base_options(1));
        PsClient chief(cluster.client_options(0, avg_model(sparse)));
        REQUIRE(chief.hello());
        REQUIRE(chief.restore(sgd_average(4), dir));
        for (int s = 4; s < 6; ++s) avg_step(chief, sparse, s);
        const std::string out = dir + "/resumed";
        std::filesystem::create_directories(out);
        REQUIRE(chief.save(6, out));
        write_manifest(out, 3, 6);
        auto average = load_checkpoint_parameters(out, avg_model(false), CheckpointValues::kAverage);
        REQUIRE(average);
        return average->values;
    };
    const auto sparse_after = resume(true, sparse_dir), dense_after = resume(false, dense_dir);
    CHECK(worst_difference(sparse_after, dense_after) < 1e-6);
    CHECK(worst_difference(sparse_after, sparse_average->values) > 1e-4);
    std::filesystem::remove_all(sparse_dir);
    std::filesystem::remove_all(dense_dir);
}

TEST_CASE("the standby shard file keeps the rows' average, which goes on folding after a load",
          "[psd][sparse][ema][shard]") {
    std::vector<TensorSpec> tensors = {{"fc/w", {8, 5}}, {"emb", {kAvgRows, kAvgWidth}}};
    tensors[1].kind = TensorKind::kRows;
    tensors[1].row_init = kAvgInit;
    const auto layout = *compute_layout(tensors, 1);
    const auto dense = ramp(40, 0.5f);
    auto update = [&](psd::ShardState& shard, int s) {
        const auto ids = pushed_rows(s);
        const auto values = row_grads(ids, s);
        const auto grads = ramp(40, 0.1f, static_cast<float>(s));
        const psd::RowSlice rows{0, ids, values};
        shard.apply({std::span<const float>(grads)}, nullptr, {}, {&rows, 1});
    };
    psd::ShardState a(layout, 0, tensors);
    a.init(sgd_average(), {std::span<const float>(dense)});
    for (int s = 0; s < 3; ++s) update(a, s);
    a.rows().materialize(nullptr);  // as psd does before writing the file
    const std::string dir = psrun::test::make_temp_dir();
    REQUIRE(a.save(dir + "/ps-0.shard"));
    psd::ShardState b(layout, 0, tensors);
    auto loaded = b.load(dir + "/ps-0.shard");
    INFO((loaded ? std::string() : loaded.error().message));
    REQUIRE(loaded);
    auto average = [](psd::ShardState& shard) {
        shard.rows().materialize(nullptr);
        const auto e = shard.rows().average(0);
        return std::vector<float>(e.begin(), e.end());
    };
    CHECK(average(b) == average(a));
    for (int s = 3; s < 5; ++s) {  // a restarted average would copy the rows at the next update
        update(a, s);
        update(b, s);
    }
    const auto after = average(b);
    CHECK(after == average(a));
    const auto values = b.rows().values(0);
    CHECK(worst_difference(after, std::vector<float>(values.begin(), values.end())) > 1e-4);
    std::filesystem::remove_all(dir);
}

TEST_CASE("a restore with another decay folds the rows' past updates with the old one, as the dense average has",
          "[psd][sparse][ema]") {
    std::vector<TensorSpec> tensors = {{"dense", {kAvgRows, kAvgWidth}}, {"emb", {kAvgRows, kAvgWidth}}};
    tensors[1].kind = TensorKind::kRows;
    tensors[1].row_init = kAvgInit;
    psd::ShardState shard(*compute_layout(tensors, 1), 0, tensors);
    const auto initial = initial_table();
    shard.init(sgd_average(), {std::span<const float>(initial)});
    for (int s = 0; s < 6; ++s) {
        if (s == 3) {  // a "restored" INIT with decay 0.5: the pushes so far folded with 0.9
            auto config = sgd_average();
            config.optimizer.ema_decay = 0.5f;
            shard.restore(config);
        }
        const auto ids = pushed_rows(s);
        const auto values = row_grads(ids, s);
        std::vector<float> dense(initial.size(), 0.0f);
        for (std::size_t i = 0; i < ids.size(); ++i)
            for (std::uint32_t c = 0; c < kAvgWidth; ++c) dense[ids[i] * kAvgWidth + c] = values[i * kAvgWidth + c];
        const psd::RowSlice rows{0, ids, values};
        shard.apply({std::span<const float>(dense)}, nullptr, {}, {&rows, 1});
    }
    shard.rows().materialize(nullptr);
    const auto sparse = shard.rows().average(0);
    const auto dense = shard.average().slice(0);
    CHECK(worst_difference({sparse.begin(), sparse.end()}, {dense.begin(), dense.end()}) < 1e-6);
}
