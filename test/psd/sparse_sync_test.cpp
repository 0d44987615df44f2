// Sparse tables in sync mode on in-process psd shards (docs/protocol.md "Sync step"): rows
// averaged over the replicas with a sparse accumulator, a stale push's rows dropped; with
// --async-tables each push's rows applied as it arrives while the dense part waits for the step.
#include <catch2/catch.hpp>

#include <chrono>
#include <future>
#include <thread>
#include <utility>

#include "test/psd/ps_fixture.h"
#include "test/psd/sparse_fixture.h"

using namespace psrun;
using namespace psrun::test::sparse;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::sgd;

namespace {

// Two sync workers (0, the chief, and 1) on 2 shards of model(true), initialised by the chief with
// SGD 0.5 from ramp(n, 1); `async_tables`: psd's --async-tables.
struct SyncPair {
    explicit SyncPair(bool async_tables) : cluster(2, options(async_tables)) {
        REQUIRE(chief.hello());
        REQUIRE(worker.hello());
        n = chief.layout().total;
        start = ramp(n, 1.0f);
        REQUIRE(chief.init(sgd(0.5f), start));
    }
    static psd::ServerOptions options(bool async_tables) {
        auto o = base_options(2);
        o.sync = true;
        o.replicas_to_aggregate = 2;
        o.async_tables = async_tables;
        return o;
    }
    Cluster cluster;
    PsClient chief{cluster.client_options(0, model(true))};
    PsClient worker{cluster.client_options(1, model(true))};
    std::size_t n = 0;
    std::vector<float> start;
};

}  // namespace

TEST_CASE("sync: rows are averaged over the replicas; a stale push's rows are dropped", "[psd][sparse]") {
    SyncPair pair(false);
    PsClient &chief = pair.chief, &worker = pair.worker;
    const std::size_t n = pair.n;
    const auto table = table_init();
    const std::vector<float> zero(n, 0.0f);
    const std::vector<std::uint32_t> ids_a{1, 2, 3}, ids_b{3, 4};
    const auto va = ramp(3 * kWidth, 0.4f), vb = ramp(2 * kWidth, -0.2f, 1.0f);
    const RowGrads ra{1, ids_a, va}, rb{1, ids_b, vb};
    // Each pulls the rows it will use next: replies held until the step completes carry them.
    const std::vector<std::uint32_t> want{4, 1};
    const RowRequest request{1, want};
    PulledRows rows_a, rows_b;
    auto first = std::async(std::launch::async, [&] {
        return chief.exchange(
            Exchange{.grads = zero, .step = 0, .row_grads = {&ra, 1}, .pulls = {&request, 1}, .rows = &rows_a});
    });
    REQUIRE(worker.exchange(
        Exchange{.grads = zero, .step = 0, .row_grads = {&rb, 1}, .pulls = {&request, 1}, .rows = &rows_b}));
    REQUIRE(first.get());
    auto expect_row = [&](std::uint32_t id) {
        std::vector<float> row(table.begin() + id * kWidth, table.begin() + (id + 1) * kWidth);
        for (std::size_t c = 0; c < kWidth; ++c) {
            float sum = 0.0f;
            for (std::size_t i = 0; i < ids_a.size(); ++i) sum += ids_a[i] == id ? va[i * kWidth + c] : 0.0f;
            for (std::size_t i = 0; i < ids_b.size(); ++i) sum += ids_b[i] == id ? vb[i * kWidth + c] : 0.0f;
            row[c] -= 0.5f * (sum * 0.5f);
        }
        return row;
    };
    for (std::size_t c = 0; c < kWidth; ++c) {
        CHECK(rows_a.rows(0)[c] == Approx(expect_row(4)[c]).margin(1e-6));
        CHECK(rows_a.rows(0)[kWidth + c] == Approx(expect_row(1)[c]).margin(1e-6));
    }
    CHECK(std::equal(rows_a.rows(0).begin(), rows_a.rows(0).end(), rows_b.rows(0).begin()));
    const auto after = pull_table(chief);
    for (std::uint32_t id : {1u, 2u, 3u, 4u})
        for (std::size_t c = 0; c < kWidth; ++c)
            CHECK(after[id * kWidth + c] == Approx(expect_row(id)[c]).margin(1e-6));
    // A push computed at step 0 arrives in step 1: dropped, rows untouched.
    auto stale = worker.exchange(Exchange{.grads = zero, .step = 0, .row_grads = {&rb, 1}});
    REQUIRE(stale);
    CHECK(stale->stale);
    CHECK(pull_table(chief) == after);
    auto stats = chief.stats(1);
    REQUIRE(stats);
    CHECK((*stats)["stale"] == 1);
}

TEST_CASE("sync with --async-tables: rows applied as each push arrives, the dense part waits for the step",
          "[psd][sparse]") {
    SyncPair pair(true);
    PsClient &chief = pair.chief, &worker = pair.worker;
    const std::size_t n = pair.n;
    const auto& start = pair.start;
    const auto table = table_init();
    const auto g = ramp(n, 0.2f, 0.1f);
    const std::vector<float> zero(n, 0.0f);
    const std::vector<std::uint32_t> ids_a{1, 2, 3}, ids_b{3, 4};
    const auto va = ramp(3 * kWidth, 0.4f), vb = ramp(2 * kWidth, -0.2f, 1.0f);
    const RowGrads ra{1, ids_a, va}, rb{1, ids_b, vb};
    // rows[id] after SGD(0.5) of the given (ids, values) pushes, each applied whole (no averaging).
    auto expect = [&](std::vector<std::pair<const std::vector<std::uint32_t>*, const std::vector<float>*>> pushes) {
        auto t = table;
        for (const auto& [ids, values] : pushes)
            for (std::size_t i = 0; i < ids->size(); ++i)
                for (std::size_t c = 0; c < kWidth; ++c) t[(*ids)[i] * kWidth + c] -= 0.5f * (*values)[i * kWidth + c];
        return t;
    };
    auto rows_pushed = [&] {
        std::uint64_t sum = 0;
        for (std::uint32_t shard : {0u, 1u}) {
            auto stats = worker.stats(shard);
            REQUIRE(stats);
            CHECK((*stats)["table_mode"] == "async");
            sum += (*stats)["rows_pushed"].get<std::uint64_t>();
        }
        return sum;
    };
    auto first = std::async(std::launch::async, [&] {
        return chief.exchange(Exchange{.grads = g, .step = 0, .row_grads = {&ra, 1}});
    });
    for (int i = 0; i < 500 && rows_pushed() < ids_a.size(); ++i)
        std::this_thread::sleep_for(std::chrono::milliseconds(10));
    REQUIRE(rows_pushed() == ids_a.size());
    // The chief's rows are in (its whole gradient), its dense gradient waits for the worker's.
    auto t1 = pull_table(worker);
    const auto want1 = expect({{&ids_a, &va}});
    for (std::uint32_t id : {1u, 2u, 3u, 4u})
        for (std::size_t c = 0; c < kWidth; ++c)
            CHECK(t1[id * kWidth + c] == Approx(want1[id * kWidth + c]).margin(1e-6));
    std::vector<float> dense(n);
    auto before = worker.pull(dense);
    REQUIRE(before);
    CHECK(before->step == 0);
    CHECK(dense == start);
    // The worker's push completes the step: the dense part is the average of the two gradients.
    auto second = worker.exchange(Exchange{.grads = zero, .step = 0, .row_grads = {&rb, 1}});
    REQUIRE(second);
    REQUIRE(first.get());
    auto after = worker.pull(dense);
    REQUIRE(after);
    CHECK(after->step == 1);
    for (std::size_t i = 0; i < n; ++i) CHECK(dense[i] == Approx(start[i] - 0.5f * (g[i] * 0.5f)).margin(1e-6));
    const auto want2 = expect({{&ids_a, &va}, {&ids_b, &vb}});
    CHECK_THAT(pull_table(worker), Catch::Matchers::Approx(want2).margin(1e-6));
    // A stale push: its dense part is dropped, its rows are applied (the tables are asynchronous).
    auto stale = worker.exchange(Exchange{.grads = zero, .step = 0, .row_grads = {&rb, 1}});
    REQUIRE(stale);
    CHECK(stale->stale);
    CHECK_THAT(pull_table(worker),
               Catch::Matchers::Approx(expect({{&ids_a, &va}, {&ids_b, &vb}, {&ids_b, &vb}})).margin(1e-6));
    auto stats = chief.stats(1);
    REQUIRE(stats);
    CHECK((*stats)["stale"] == 1);
    CHECK((*stats)["step"] == 1);
}

TEST_CASE("async tables without sync are refused, naming both flags", "[psd][sparse]") {
    auto o = base_options(1);
    o.endpoints = {"tcp://127.0.0.1:0"};
    o.async_tables = true;
    CHECK_THROWS_WITH(psd::ParameterServer{o}, Catch::Contains("--async-tables") && Catch::Contains("--sync"));
}
