// Inference over tables keyed by raw 64-bit ids (workerd/keyed_rows.h, keyed_lookup.h,
// keyed_export.h; docs/sparse.md "Raw ids"): a checkpoint's rows read back from psd's shard files
// (id map digits and slots), an id that is not a row reading as its initial values exactly as psd
// draws them, predictions through the per-batch lookup equal to a dense table holding the same
// rows, and the export's table of rows with its id map.
#include <catch2/catch.hpp>

#include <filesystem>
#include <fstream>
#include <random>
#include <string>
#include <vector>

#include "common/row_init.h"
#include "common/tensor_file.h"
#include "workerd/inference.h"
#include "workerd/keyed_export.h"
#include "workerd/keyed_lookup.h"
#include "workerd/keyed_rows.h"
#include "workerd/nn/parameter_init.h"

namespace psrun::worker {
namespace {

const RowInit kKeyedTestInit{RowInitKind::kUniform, 0.05f, 0x1234};

// x [4] floats (the primary input) and item [3] raw ids through emb_i (capacity 20, dim 3).
nn::ModelDescription keyed_test_model() {
    auto model = nn::parse_model_text(R"({"name": "rec", "targets": 1,
      "inputs": [{"name": "x", "dims": [4], "type": "float"}, {"name": "item", "dims": [3], "type": "int"}],
      "layers": [
        {"kind": "dense", "name": "fx", "inputs": ["x"], "units": 2},
        {"kind": "embedding", "name": "emb_i", "inputs": ["item"], "vocabulary": 20, "dim": 3},
        {"kind": "flatten", "name": "fi", "axis": 1},
        {"kind": "concat", "name": "all", "inputs": ["fx", "fi"], "axis": 1},
        {"kind": "dense", "name": "out", "units": 1}],
      "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"}})",
                                      "rec.json");
    if (!model) FAIL(model.error().message);
    return *model;
}

std::size_t keyed_test_tensor(const nn::ModelDescription& model, const std::string& name) {
    for (std::size_t i = 0; i < model.tensors.size(); ++i)
        if (model.tensors[i].name == name) return i;
    FAIL("no tensor " + name);
    return 0;
}

// psd's id map encoding (psd/shard_checkpoint_keyed.cpp): id, slot, last update as base-2^16 digits.
void put_keyed_digits(std::vector<float>& out, std::uint64_t v, int digits) {
    for (int d = 0; d < digits; ++d, v >>= 16) out.push_back(static_cast<float>(v & 0xffff));
}

}  // namespace

TEST_CASE("KeyedRows: rows by id, and an id that is not a row reads as psd's initial values", "[keyed]") {
    const std::vector<std::uint64_t> ids{0xFFFFFFFFFFFFFFF0ull, 7, 1ull << 40};
    std::vector<float> values{1, 2, 3, 4, 5, 6, 7, 8, 9};
    const KeyedRows rows("emb/table", 3, kKeyedTestInit, ids, values);
    REQUIRE(rows.rows() == 3);
    CHECK(rows.ids()[0] == 7);
    CHECK(rows.ids()[2] == 0xFFFFFFFFFFFFFFF0ull);
    CHECK(rows.find(1ull << 40) == std::optional<std::size_t>(1));
    CHECK_FALSE(rows.find(8));
    const std::vector<std::uint64_t> keys{7, 99, 0xFFFFFFFFFFFFFFF0ull};
    std::vector<float> out(9);
    CHECK(rows.gather(keys, out) == 2);
    CHECK(out[0] == 4);
    CHECK(out[6] == 1);
    std::vector<float> initial(3);
    fill_row(kKeyedTestInit, 99, initial);
    for (int c = 0; c < 3; ++c) CHECK(out[3 + static_cast<std::size_t>(c)] == initial[static_cast<std::size_t>(c)]);
    CHECK(initial[0] != 0.0f);
    CHECK_THROWS_AS(KeyedRows("t", 3, kKeyedTestInit, {1, 1}, std::vector<float>(6)), std::invalid_argument);
    std::vector<float> small(3);
    CHECK_THROWS_AS(rows.gather(keys, small), std::invalid_argument);
}

TEST_CASE("KeyedRows::load reads every shard's id map and slots; a damaged digit is refused", "[keyed]") {
    const auto dir = std::filesystem::temp_directory_path() / ("keyed-rows-" + std::to_string(::getpid()));
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    TensorSpec spec{"emb/table", {8, 2}, TensorClass::kTrainable, TensorKind::kKeyedRows, kKeyedTestInit, {}};
    // Shard 0 of 2 holds id 1ull<<63 in slot 3 and id 5 in slot 0; shard 1 id 77 in slot 1 (4 slots each).
    auto write_shard = [&](int shard, const std::vector<std::pair<std::uint64_t, std::uint64_t>>& entries,
                           bool damage) {
        std::vector<float> keys, param(4 * 2);
        for (const auto& [id, slot] : entries) {
            put_keyed_digits(keys, id, 4);
            put_keyed_digits(keys, slot, 2);
            put_keyed_digits(keys, 17, 4);
            param[slot * 2] = static_cast<float>(id % 1000) + 0.5f;
            param[slot * 2 + 1] = -static_cast<float>(slot);
        }
        if (damage) keys[1] = 0.5f;
        const std::string base = "emb/table@" + std::to_string(shard) + "%2/";
        const std::vector<TensorView> views{{base + "keys", {entries.size(), 10}, keys},
                                            {base + "param", {4, 2}, param}};
        REQUIRE(write_tensor_file((dir / ("ps-" + std::to_string(shard) + "-of-2.tensors")).string(), views));
    };
    std::ofstream(dir / "manifest.json") << R"({"step": 3, "files": ["ps-0-of-2.tensors", "ps-1-of-2.tensors"]})";
    write_shard(0, {{1ull << 63, 3}, {5, 0}}, false);
    write_shard(1, {{77, 1}}, false);
    auto rows = KeyedRows::load(dir.string(), spec, false);
    REQUIRE(rows);
    REQUIRE(rows->rows() == 3);
    CHECK(rows->ids()[0] == 5);
    CHECK(rows->ids()[1] == 77);
    CHECK(rows->ids()[2] == 1ull << 63);
    const std::vector<float> want{5.5f, 0.0f, 77.5f, -1.0f, static_cast<float>((1ull << 63) % 1000) + 0.5f, -3.0f};
    for (std::size_t i = 0; i < want.size(); ++i) CHECK(rows->values()[i] == want[i]);
    CHECK(rows->init() == kKeyedTestInit);
    CHECK(KeyedRows::load(dir.string(), spec, true).error().code == ErrorCode::kNotFound);  // no average
    write_shard(1, {{77, 1}}, true);
    auto damaged = KeyedRows::load(dir.string(), spec, false);
    REQUIRE_FALSE(damaged);
    CHECK(damaged.error().message.find("damaged") != std::string::npos);
    std::filesystem::remove_all(dir);
}

TEST_CASE("predictions through the keyed lookup equal a dense table holding the same rows", "[keyed]") {
    const nn::ModelDescription model = keyed_test_model();
    const std::size_t table = keyed_test_tensor(model, "emb_i/table");
    std::vector<float> full(static_cast<std::size_t>(model.parameter_count));
    nn::initialize_parameters(model, 5, full);
    std::vector<float> dense;  // the dense tensors in model order, the table left out
    for (std::size_t i = 0; i < model.tensors.size(); ++i)
        if (i != table)
            dense.insert(dense.end(), full.begin() + model.tensors[i].offset,
                         full.begin() + model.tensors[i].offset + model.tensors[i].size);
    // 6 rows of the checkpoint; the data also holds ids that are none (their initial values).
    std::mt19937_64 rng(9);
    std::vector<std::uint64_t> ids;
    std::vector<float> values;
    for (int r = 0; r < 6; ++r) {
        ids.push_back(rng());
        for (int c = 0; c < 3; ++c)
            values.push_back(static_cast<float>(r) * 0.1f - 0.2f + 0.01f * static_cast<float>(c));
    }
    const std::size_t n = 11;
    LabeledImages data;
    data.input = InputKind::kFeatures;
    data.images.count = n;
    data.images.width = 4;
    data.images.height = 1;
    data.images.type = PixelType::kFloat32;
    data.target = TargetKind::kVector;
    data.target_length = 1;
    data.targets.assign(n, 0.0f);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (std::size_t i = 0; i < n * 4; ++i) data.images.f32.push_back(normal(rng));
    InputColumn item{"item", "item.npy", 3, {}, {}, {}};
    for (std::size_t i = 0; i < n * 3; ++i) item.u64.push_back(i % 4 == 3 ? rng() : ids[(i * 5) % 6]);
    data.columns.push_back(item);

    InferenceModel keyed;
    keyed.model = model;
    keyed.params = dense;
    keyed.keyed.emplace_back("emb_i/table", 3, kKeyedTestInit, ids, values);
    keyed.raw_ids = {"emb_i"};
    CHECK(keyed.raw_inputs() == std::vector<std::string>{"item"});

    // The reference: the batch's distinct ids as rows 0.. of a dense table of the same values.
    const KeyedRows& rows = keyed.keyed.front();
    std::vector<std::uint64_t> distinct(item.u64);
    std::sort(distinct.begin(), distinct.end());
    distinct.erase(std::unique(distinct.begin(), distinct.end()), distinct.end());
    REQUIRE(distinct.size() <= 20);
    std::vector<float> table_values(20 * 3, 0.0f);
    CHECK(rows.gather(distinct, table_values) == 6);
    std::copy(table_values.begin(), table_values.end(), full.begin() + model.tensors[table].offset);
    InferenceModel reference;
    reference.model = model;
    reference.params = full;
    LabeledImages ref_data = data;
    ref_data.columns[0].u64.clear();
    for (const auto id : item.u64)
        ref_data.columns[0].i32.push_back(
            static_cast<std::int32_t>(std::lower_bound(distinct.begin(), distinct.end(), id) - distinct.begin()));

    auto want = predict_probabilities(reference, ref_data, 100);
    REQUIRE(want);
    for (const std::int64_t batch : {100, 4, 1}) {  // one batch, batches with a padded last one, single examples
        auto got = predict_probabilities(keyed, data, batch);
        REQUIRE(got);
        REQUIRE(got->size() == n);
        for (std::size_t i = 0; i < n; ++i) CHECK((*got)[i] == Approx((*want)[i]).margin(1e-6));
    }
    // Data that gives the keyed input as row ids, not raw ids, is refused.
    CHECK_FALSE(predict_probabilities(keyed, ref_data, 4));
    // --raw-ids must name the keyed table.
    keyed.raw_ids = {};
    CHECK_THROWS_AS(predict_probabilities(keyed, data, 4), UsageError);
}

TEST_CASE("the export's table: the rows in id order, then a zero row for ids not in the map", "[keyed]") {
    const nn::ModelDescription model = keyed_test_model();
    const std::size_t table = keyed_test_tensor(model, "emb_i/table");
    const std::size_t dense_floats = static_cast<std::size_t>(model.parameter_count - model.tensors[table].size);
    std::vector<float> dense(dense_floats);
    for (std::size_t i = 0; i < dense.size(); ++i) dense[i] = static_cast<float>(i);
    const std::vector<KeyedRows> tables{KeyedRows("emb_i/table", 3, kKeyedTestInit, {9, 4}, {1, 1, 1, 2, 2, 2})};
    const KeyedExport out = keyed_export_model(model, dense, tables);
    const auto& t = out.model.tensors[table];
    CHECK(t.shape == std::vector<std::int64_t>{3, 3});
    CHECK(out.model.parameter_count == static_cast<std::int64_t>(dense_floats + 9));
    REQUIRE(out.params.size() == dense_floats + 9);
    const std::vector<float> want{2, 2, 2, 1, 1, 1, 0, 0, 0};  // id 4, id 9, the default row
    for (std::size_t i = 0; i < 9; ++i) CHECK(out.params[static_cast<std::size_t>(t.offset) + i] == want[i]);
    for (const auto& n : out.model.nodes)
        if (n.name == "emb_i") CHECK(n.attrs["vocabulary"] == 3);
    CHECK_THROWS_AS(keyed_export_model(model, std::vector<float>(dense_floats - 1), tables), std::invalid_argument);
    const std::string npy = npy_u64_bytes(tables.front().ids());
    CHECK(npy.size() == 128 + 16);
    CHECK(npy.substr(0, 6) == "\x93NUMPY");
    CHECK(npy[128] == 4);
    CHECK(keyed_ids_path("/d/model-200.onnx", "emb/i") == "/d/model-200.emb_i.ids.npy");
}

}  // namespace psrun::worker
