// Several sparse embedding tables in one model (workerd/sparse_tables.h, docs/sparse.md): each
// table maps the ids of its own model input to local rows, the blocks sit one after the other in
// the tail, and the row gradients come out per table; the exit-2 refusals name the input.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/network.h"
#include "workerd/sparse_tables.h"
#include "workerd/step_batches.h"

namespace psrun::worker {

namespace {

// user [2] and item [3] ids, each read by its own embedding, plus a float vector: a recommender.
// `shared`: a second node reads the item ids too.
nn::ModelDescription recommender(bool shared = false) {
    std::string text = R"({"name": "rec", "targets": 1,
      "inputs": [{"name": "user", "dims": [2], "type": "int"}, {"name": "item", "dims": [3], "type": "int"},
                 {"name": "x", "dims": [4], "type": "float"}],
      "layers": [
        {"kind": "embedding", "name": "emb_u", "inputs": ["user"], "vocabulary": 10, "dim": 2},
        {"kind": "flatten", "name": "fu", "axis": 1},
        {"kind": "embedding", "name": "emb_i", "inputs": ["item"], "vocabulary": 20, "dim": 3},
        {"kind": "flatten", "name": "fi", "axis": 1},
        {"kind": "dense", "name": "fx", "inputs": ["x"], "units": 2},
        {"kind": "concat", "name": "all", "inputs": ["fu", "fi", "fx"], "axis": 1},
        {"kind": "dense", "name": "out", "units": 1}],
      "loss": {"kind": "sigmoid_cross_entropy", "reduction": "mean"}})";
    if (shared) {
        const std::string extra =
            R"({"kind": "embedding", "name": "emb_i2", "inputs": ["item"], "vocabulary": 20, "dim": 1},
        {"kind": "flatten", "name": "fi2", "axis": 1},
        )";
        text.insert(text.find(R"({"kind": "dense", "name": "fx")"), extra);
        text.replace(text.find(R"(["fu", "fi", "fx"])"), 18, R"(["fu", "fi", "fi2", "fx"])");
    }
    auto model = nn::parse_model_text(text, "rec.json");
    if (!model) FAIL(model.error().message);
    return *model;
}

std::string sparse_usage_error(const nn::ModelDescription& model, const std::vector<std::string>& names) {
    try {
        SparseTables tables(model, names, 1);
    } catch (const UsageError& e) {
        return e.what();
    }
    return {};
}

}  // namespace

TEST_CASE("two sparse tables map their own inputs' ids to local rows and hand out their gradient rows",
          "[trainer][sparse]") {
    const nn::ModelDescription model = recommender();
    SparseTables tables(model, {"emb_i/table", "emb_u"}, 7);  // any order: kept in the model's tensor order
    REQUIRE(tables.tables().size() == 2);
    const SparseTable& user = tables.tables()[0];
    const SparseTable& item = tables.tables()[1];
    CHECK(user.name() == "emb_u/table");
    CHECK(item.name() == "emb_i/table");
    CHECK(model.inputs.at(user.input()).name == "user");
    CHECK(model.inputs.at(item.input()).name == "item");
    CHECK(tables.names() == "emb_u/table, emb_i/table");
    CHECK(tables.is_sparse(user.tensor()));
    CHECK(tables.is_sparse(item.tensor()));
    const auto wire = tables.wire_tensors();
    CHECK(wire[user.tensor()].kind == TensorKind::kRows);
    CHECK(wire[item.tensor()].kind == TensorKind::kRows);
    CHECK(wire[user.tensor()].row_init.seed != wire[item.tensor()].row_init.seed);  // two tables, two streams
    for (const auto& t : tables.dense_tensors()) CHECK(t.name.find("table") == std::string::npos);
    std::size_t dense = 0;
    for (const auto& t : tables.dense_tensors()) dense += t.size;

    // Batches of 2: the user block holds min(10, 2 x 2) = 4 rows of 2, the item block min(20, 2 x 3) = 6 of 3.
    CHECK(tables.tail_floats(2) == 4 * 2 + 6 * 3);
    const nn::ModelDescription local = tables.local_model(2);
    CHECK(local.tensors[user.tensor()].shape == std::vector<std::int64_t>{4, 2});
    CHECK(local.tensors[item.tensor()].shape == std::vector<std::int64_t>{6, 3});
    CHECK(local.tensors[user.tensor()].offset == static_cast<std::int64_t>(dense));
    CHECK(local.tensors[item.tensor()].offset == static_cast<std::int64_t>(dense + 8));
    CHECK(local.parameter_count == static_cast<std::int64_t>(dense + 26));

    std::vector<std::int32_t> user_ids{3, 5, 3, 9};
    std::vector<std::int32_t> item_ids{7, 7, 1, 19, 0, 1};
    auto ids_of = [&](std::size_t input) -> std::span<std::int32_t> {
        if (input == user.input()) return user_ids;
        if (input == item.input()) return item_ids;
        FAIL("map_batch asked for input " << input << ", which no table reads");
        return {};
    };
    tables.map_batch(ids_of, 2, 2);
    CHECK(user_ids == std::vector<std::int32_t>{0, 1, 0, 2});        // distinct 3, 5, 9
    CHECK(item_ids == std::vector<std::int32_t>{2, 2, 1, 3, 0, 1});  // distinct 0, 1, 7, 19
    CHECK(tables.distinct() == 7);
    const auto requests = tables.requests();
    REQUIRE(requests.size() == 2);
    CHECK(requests[0].tensor == user.tensor());
    CHECK(std::vector<std::uint32_t>(requests[0].ids.begin(), requests[0].ids.end()) ==
          std::vector<std::uint32_t>{3, 5, 9});
    CHECK(requests[1].tensor == item.tensor());
    CHECK(std::vector<std::uint32_t>(requests[1].ids.begin(), requests[1].ids.end()) ==
          std::vector<std::uint32_t>{0, 1, 7, 19});

    // The gradient tail: the user block at 0 (3 rows of 2 used), the item block at 8 (4 rows of 3).
    std::vector<float> tail(26);
    for (std::size_t i = 0; i < tail.size(); ++i) tail[i] = static_cast<float>(i);
    const auto grads = tables.row_grads(tail);
    REQUIRE(grads.size() == 2);
    CHECK(grads[0].tensor == user.tensor());
    CHECK(std::vector<float>(grads[0].values.begin(), grads[0].values.end()) == std::vector<float>{0, 1, 2, 3, 4, 5});
    CHECK(grads[1].tensor == item.tensor());
    CHECK(grads[1].ids.size() == 4);
    REQUIRE(grads[1].values.size() == 12);
    CHECK(grads[1].values.front() == 8.0f);
    CHECK(grads[1].values.back() == 19.0f);
    const auto rows = tables.grad_rows(tail);
    REQUIRE(rows.size() == 2);
    CHECK(rows[0].data() == tail.data());
    CHECK(rows[1].data() == tail.data() + 8);
    CHECK(rows[1].size() == 12);

    // A short last batch of 1 example (network built for 2): its padding reads row 0.
    user_ids = {9, 9, 4, 4};
    item_ids = {2, 1, 2, 5, 5, 5};
    tables.map_batch(ids_of, 1, 2);
    CHECK(user_ids == std::vector<std::int32_t>{0, 0, 0, 0});
    CHECK(item_ids == std::vector<std::int32_t>{1, 0, 1, 0, 0, 0});
    CHECK(tables.distinct() == 3);

    // An id beyond its own table names that table (item has 20 rows, user 10).
    user_ids = {1, 2, 3, 4};
    item_ids = {1, 2, 3, 4, 5, 15};
    tables.map_batch(ids_of, 2, 2);  // 15 < 20: fine for the item table
    user_ids = {1, 12, 3, 4};
    try {
        tables.map_batch(ids_of, 2, 2);
        FAIL("an id beyond the user table was taken");
    } catch (const std::out_of_range& e) {
        CHECK(std::string(e.what()) ==
              "id 12 at position 1 of example 0 is outside the 10 rows of sparse table emb_u/table");
    }
}

TEST_CASE("accumulation: an update's micro-batches are mapped together and each restored with the union's rows",
          "[trainer][sparse][accumulate]") {
    const nn::ModelDescription model = recommender();
    SparseTables tables(model, {"emb_u", "emb_i"}, 7);
    // Micro-batches of 2, two per update: the local tables hold the ids of 4 examples.
    const nn::ModelDescription local = tables.local_model(4);
    CHECK(local.tensors[tables.tables()[0].tensor()].shape == std::vector<std::int64_t>{8, 2});
    CHECK(local.tensors[tables.tables()[1].tensor()].shape == std::vector<std::int64_t>{12, 3});
    std::vector<float> params(static_cast<std::size_t>(local.parameter_count));
    std::vector<float> grads(params.size());
    nn::NetworkOptions options;
    options.batch_size = 2;
    auto created = nn::Network::create(local, options, params, grads);
    if (!created) FAIL(created.error().message);
    nn::Network& n = **created;
    const std::size_t u = tables.tables()[0].input(), i = tables.tables()[1].input(), x = 2;
    auto fill = [&](std::vector<std::int32_t> user, std::vector<std::int32_t> item, float value, float target) {
        std::copy(user.begin(), user.end(), n.input_ids(u).begin());
        std::copy(item.begin(), item.end(), n.input_ids(i).begin());
        std::fill(n.input(x).begin(), n.input(x).end(), value);
        std::fill(n.targets().begin(), n.targets().end(), target);
    };
    auto ids = [&](std::size_t input) {
        return std::vector<std::int32_t>(n.input_ids(input).begin(), n.input_ids(input).end());
    };
    StepBatches step(n, 2);
    fill({3, 5, 3, 9}, {7, 7, 1, 19, 0, 1}, 0.5f, 1.0f);
    step.save(n, 0);
    fill({9, 4, 4, 4}, {2, 19, 2, 5, 5, 0}, -1.0f, 0.0f);
    step.save(n, 1);
    CHECK(step.ids(u).size() == 8);
    CHECK(step.ids(i).size() == 12);
    CHECK(step.ids(x).empty());  // a float input
    tables.map_batch([&](std::size_t input) { return step.ids(input); }, 4, 4);
    const auto requests = tables.requests();  // one pull for the update: the union of both micro-batches' ids
    CHECK(std::vector<std::uint32_t>(requests[0].ids.begin(), requests[0].ids.end()) ==
          std::vector<std::uint32_t>{3, 4, 5, 9});
    CHECK(std::vector<std::uint32_t>(requests[1].ids.begin(), requests[1].ids.end()) ==
          std::vector<std::uint32_t>{0, 1, 2, 5, 7, 19});
    step.restore(n, 0);  // the same id, the same local row in both micro-batches
    CHECK(ids(u) == std::vector<std::int32_t>{0, 2, 0, 3});
    CHECK(ids(i) == std::vector<std::int32_t>{4, 4, 1, 5, 0, 1});
    CHECK(n.input(x)[0] == 0.5f);
    CHECK(n.targets()[1] == 1.0f);
    step.restore(n, 1);
    CHECK(ids(u) == std::vector<std::int32_t>{3, 1, 1, 1});
    CHECK(ids(i) == std::vector<std::int32_t>{2, 5, 2, 3, 3, 0});
    CHECK(n.input(x)[3] == -1.0f);
    CHECK(n.targets()[0] == 0.0f);
}

TEST_CASE("accumulation with raw ids: each micro-batch's raw ids are kept and the update's mapped together",
          "[trainer][sparse][accumulate]") {
    const nn::ModelDescription model = recommender();
    SparseTables tables(model, {"emb_u"}, 7, RawIdTables{.names = {"emb_i"}, .policy = {}});
    REQUIRE(tables.tables().size() == 2);
    const std::size_t keyed = tables.tables()[0].keyed() ? 0 : 1;
    REQUIRE(tables.tables()[keyed].keyed());
    const nn::ModelDescription local = tables.local_model(4);  // micro-batches of 2, two per update
    std::vector<float> params(static_cast<std::size_t>(local.parameter_count));
    std::vector<float> grads(params.size());
    nn::NetworkOptions options;
    options.batch_size = 2;
    auto created = nn::Network::create(local, options, params, grads);
    if (!created) FAIL(created.error().message);
    nn::Network& n = **created;
    const std::size_t u = tables.tables()[1 - keyed].input(), i = tables.tables()[keyed].input();
    const std::uint64_t A = 0xFFFFFFFFFFFFFF01ull, B = 7, C = 1ull << 40, D = 99, E = 0x8000000000000000ull,
                        F = 12345678901234ull, G = 3;
    const std::vector<std::uint64_t> first{A, B, A, C, D, E}, second{C, F, A, F, G, B};
    StepBatches step(n, 2);
    int k = 0;
    for (const auto* raw : {&first, &second}) {  // as Trainer::load_step_batches loads them
        std::fill(n.input_ids(u).begin(), n.input_ids(u).end(), k + 1);
        const auto buffer = tables.raw_ids(i, 2);
        REQUIRE(buffer.size() == 6);
        std::copy(raw->begin(), raw->end(), buffer.begin());
        step.save(n, k);
        tables.keep_raw(k, 2, 2);
        ++k;
    }
    tables.map_batch([&](std::size_t input) { return step.ids(input); }, 4, 4);
    const auto request = tables.requests()[keyed];  // one pull for the update: the union, ascending
    CHECK(std::vector<std::uint64_t>(request.keys.begin(), request.keys.end()) ==
          std::vector<std::uint64_t>{G, B, D, C, F, E, A});
    std::map<std::uint64_t, std::int32_t> row_of;  // each raw id, one local row in both micro-batches
    std::set<std::int32_t> rows;
    k = 0;
    for (const auto* raw : {&first, &second}) {
        step.restore(n, k++);
        const auto ids = n.input_ids(i);
        for (std::size_t p = 0; p < raw->size(); ++p) {
            const auto [it, fresh] = row_of.emplace((*raw)[p], ids[p]);
            CHECK(it->second == ids[p]);
            if (fresh) rows.insert(ids[p]);
        }
        CHECK(n.input_ids(u)[0] == k - 1);  // the row-id table: ids 1 and 2, local rows 0 and 1
    }
    CHECK(row_of.size() == 7);
    CHECK(rows.size() == 7);  // distinct ids, distinct rows
}

TEST_CASE("the automatic rule makes every table over the threshold sparse", "[trainer][sparse]") {
    const nn::ModelDescription model = recommender();
    CHECK(SparseTables::automatic(model, 20, 1) == std::vector<std::string>{"emb_u", "emb_i"});  // 20 and 60 floats
    CHECK(SparseTables::automatic(model, 21, 1) == std::vector<std::string>{"emb_i"});
    CHECK(SparseTables::automatic(model, 61, 1).empty());
}

TEST_CASE("several sparse tables: the refusals name the table and the input", "[trainer][sparse]") {
    const nn::ModelDescription model = recommender();
    CHECK(
        sparse_usage_error(model, {"emb_u", "emb_u/table"}) ==
        "--sparse-embedding emb_u/table: names embedding emb_u's table again (already --sparse-embedding emb_u): give "
        "each table once");
    CHECK(sparse_usage_error(model, {"emb_u", "emb_u"}).find("names embedding emb_u's table again") !=
          std::string::npos);
    CHECK(sparse_usage_error(model, {"emb_u", "fx"}) ==
          "--sparse-embedding fx: no embedding of model rec has that name or table; its embeddings: emb_u (table "
          "emb_u/table), emb_i (table emb_i/table)");
    const nn::ModelDescription shared = recommender(true);
    CHECK(sparse_usage_error(shared, {"emb_u", "emb_i"}) ==
          "--sparse-embedding emb_i: node emb_i2 also reads the model input item: a sparse table's embedding must be "
          "its only reader");
    CHECK(sparse_usage_error(shared, {"emb_u"}).empty());  // the user table alone is fine
    // A padding row (nn.Embedding(padding_idx=...)) stays dense: psd does not keep it yet.
    auto padded = recommender();
    for (auto& n : padded.nodes)
        if (n.name == "emb_i") n.attrs["padding_index"] = 0;
    CHECK(sparse_usage_error(padded, {"emb_i"}).find("has padding_index 0") != std::string::npos);
    CHECK(SparseTables::automatic(padded, 1, 1) == std::vector<std::string>{"emb_u"});
}

}  // namespace psrun::worker
