// Sparse tables on in-process psd shards through PsClient (docs/protocol.md "Sparse tables"):
// deterministic initialisation on psd, every optimizer equal to the dense update, lazy Adam's
// step count, bf16 rows, bad ids (sync: sparse_sync_test.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <future>
#include <numeric>
#include <thread>

#include <zmq.hpp>

#include "common/row_init.h"
#include "common/wire_precision.h"
#include "test/psd/ps_fixture.h"
#include "test/psd/sparse_fixture.h"

using namespace psrun;
using psrun::test::base_options;
using psrun::test::Cluster;
using psrun::test::ramp;
using psrun::test::sgd;
using namespace psrun::test::sparse;

namespace {

// One step's sparse gradient: `n` ids with repeats, and its rows.
struct Step {
    std::vector<std::uint32_t> ids;
    std::vector<float> values;
};
Step step_grads(int step, std::size_t n) {
    Step s;
    for (std::size_t i = 0; i < n; ++i) s.ids.push_back(static_cast<std::uint32_t>((i * 37 + step * 101) % 250));
    s.ids.push_back(s.ids[0]);  // a repeat: summed by the client
    s.values = ramp(s.ids.size() * kWidth, 0.3f * static_cast<float>(step + 1), -0.1f);
    return s;
}

}  // namespace

TEST_CASE("rows start on psd from the seed and row id, the same for any shard count", "[psd][sparse]") {
    const auto expected = table_init();
    for (std::uint32_t shards : {1u, 3u}) {
        Cluster cluster(shards, base_options(1));
        PsClient chief(cluster.client_options(0, model(true)));
        REQUIRE(chief.hello());
        CHECK(chief.layout().total == 16 * 10 + 10);  // the table is not in the dense buffer
        REQUIRE(chief.layout().tables.size() == 1);
        REQUIRE(chief.init(sgd(0.1f), ramp(chief.layout().total, 1.0f)));
        CHECK(pull_table(chief) == expected);
        auto stats = chief.stats(0);
        REQUIRE(stats);
        CHECK((*stats)["row_floats"] == std::size_t{(kRows + shards - 1) / shards} * kWidth);  // its 1/K of the rows
    }
    std::size_t in_range = 0;
    for (float v : expected) in_range += std::fabs(v) <= 0.1f;
    CHECK(in_range == expected.size());
}

// SGD and Adagrad without decay: any rows. Stateful kinds and weight decay are lazy on rows (a
// row's slots and decay move only when it is pushed; dense rows move at every update), so there
// the same rows are pushed at every update and the others stay as they started.
TEST_CASE("sparse rows equal the dense update bit for bit, with repeated ids summed, for every optimizer",
          "[psd][sparse]") {
    struct Case {
        OptimizerKind kind;
        float weight_decay;
    };
    for (auto [kind, weight_decay] : {Case{OptimizerKind::kSgd, 0.0f}, Case{OptimizerKind::kAdagrad, 0.0f},
                                      Case{OptimizerKind::kSgd, 0.01f}, Case{OptimizerKind::kMomentum, 0.0f},
                                      Case{OptimizerKind::kNesterov, 0.01f}, Case{OptimizerKind::kAdam, 0.01f},
                                      Case{OptimizerKind::kAdamTorch, 0.01f}, Case{OptimizerKind::kAdamW, 0.1f}}) {
        CAPTURE(std::string(to_string(kind)), weight_decay);
        const bool lazy = weight_decay > 0.0f || (kind != OptimizerKind::kSgd && kind != OptimizerKind::kAdagrad);
        wire::InitConfig config;
        config.optimizer = OptimizerConfig{.kind = kind, .learning_rate = 0.05f, .weight_decay = weight_decay};
        // Dense reference: the table is an ordinary tensor, its gradient scattered by hand.
        Cluster dense_cluster(1, base_options(1));
        PsClient dense(dense_cluster.client_options(0, model(false)));
        REQUIRE(dense.hello());
        const std::size_t n = dense.layout().total;
        std::vector<float> init = ramp(n, 0.5f);
        const auto table = table_init();
        std::copy(table.begin(), table.end(), init.begin() + 160);
        REQUIRE(dense.init(config, init));
        // Sparse, on two shards.
        Cluster cluster(2, base_options(1));
        PsClient sparse(cluster.client_options(0, model(true)));
        REQUIRE(sparse.hello());
        const std::size_t m = sparse.layout().total;
        std::vector<float> sparse_init(init.begin(), init.begin() + 160);
        sparse_init.insert(sparse_init.end(), init.end() - 10, init.end());
        REQUIRE(sparse.init(config, sparse_init));
        for (int s = 0; s < 3; ++s) {
            auto g = step_grads(s, 40);
            if (lazy) g.ids = step_grads(0, 40).ids;  // the same rows at every update
            std::vector<float> dense_grad = ramp(n, -0.2f, 0.05f);
            std::fill(dense_grad.begin() + 160, dense_grad.end() - 10, 0.0f);
            for (std::size_t i = 0; i < g.ids.size(); ++i)
                for (std::size_t c = 0; c < kWidth; ++c)
                    dense_grad[160 + g.ids[i] * kWidth + c] += g.values[i * kWidth + c];
            std::vector<float> out(n);
            REQUIRE(dense.push_pull(dense_grad, static_cast<std::uint64_t>(s), out));
            std::vector<float> sparse_grad(dense_grad.begin(), dense_grad.begin() + 160);
            sparse_grad.insert(sparse_grad.end(), dense_grad.end() - 10, dense_grad.end());
            const RowGrads rows{1, g.ids, g.values};
            ParamFrames frames;
            auto info = sparse.exchange(Exchange{.grads = sparse_grad,
                                                 .step = static_cast<std::uint64_t>(s),
                                                 .row_grads = {&rows, 1},
                                                 .params = &frames});
            REQUIRE(info);
            CHECK(info->step == static_cast<std::uint64_t>(s + 1));
            std::vector<float> sparse_out(m);
            frames.copy_to(sparse_out, sparse.layout());
            CHECK(std::equal(sparse_out.begin(), sparse_out.begin() + 160, out.begin()));
            CHECK(std::equal(sparse_out.end() - 10, sparse_out.end(), out.end() - 10));
        }
        std::vector<float> final_dense(n);
        REQUIRE(dense.pull(final_dense));
        const auto final_table = pull_table(sparse);
        CHECK(final_table != table);
        if (!lazy) {
            CHECK(std::equal(final_table.begin(), final_table.end(), final_dense.begin() + 160));
            continue;
        }
        const auto pushed = step_grads(0, 40).ids;
        std::size_t moved = 0;
        for (std::uint32_t r = 0; r < kRows; ++r) {
            const auto row = final_table.begin() + std::size_t{r} * kWidth;
            if (std::find(pushed.begin(), pushed.end(), r) != pushed.end()) {
                moved += !std::equal(row, row + kWidth, table.begin() + std::size_t{r} * kWidth);
                CHECK(std::equal(row, row + kWidth, final_dense.begin() + 160 + std::size_t{r} * kWidth));
            } else {
                CHECK(std::equal(row, row + kWidth, table.begin() + std::size_t{r} * kWidth));
            }
        }
        CHECK(moved == 40);  // ids are distinct but for the one repeat
    }
}

TEST_CASE("lazy Adam: a row's slots move only when it is pushed, with the table's update count as t", "[psd][sparse]") {
    Cluster cluster(2, base_options(1));
    PsClient chief(cluster.client_options(0, model(true)));
    REQUIRE(chief.hello());
    wire::InitConfig config;
    config.optimizer = OptimizerConfig{.kind = OptimizerKind::kAdam, .learning_rate = 0.01f};
    const std::size_t n = chief.layout().total;
    REQUIRE(chief.init(config, ramp(n, 0.5f)));
    const auto table = table_init();
    const std::vector<float> zero(n, 0.0f);
    // Updates 1 and 2 push row 5 only; update 3 pushes row 5 and, for the first time, row 6.
    std::vector<float> g5(kWidth, 0.5f), g56(2 * kWidth, 0.5f);
    for (int s = 0; s < 2; ++s) {
        const std::vector<std::uint32_t> ids{5};
        const RowGrads rows{1, ids, g5};
        REQUIRE(
            chief.exchange(Exchange{.grads = zero, .step = static_cast<std::uint64_t>(s), .row_grads = {&rows, 1}}));
    }
    const std::vector<std::uint32_t> ids{6, 5};
    const RowGrads rows{1, ids, g56};
    REQUIRE(chief.exchange(Exchange{.grads = zero, .step = 2, .row_grads = {&rows, 1}}));
    const auto now = pull_table(chief);
    // Row 6, first pushed at update 3: m = (1-b1) g, v = (1-b2) g^2, lr_t = lr sqrt(1-b2^3) / (1-b1^3).
    const double b1 = 0.9, b2 = 0.999, g = 0.5;
    const double lr_t = 0.01 * std::sqrt(1 - std::pow(b2, 3)) / (1 - std::pow(b1, 3));
    const double step6 = lr_t * ((1 - b1) * g) / (std::sqrt((1 - b2) * g * g) + 1e-8);
    for (std::size_t c = 0; c < kWidth; ++c)
        CHECK(now[6 * kWidth + c] == Approx(table[6 * kWidth + c] - step6).epsilon(1e-5));
    // Row 5, pushed at updates 1, 2, 3 (m and v accumulate; t = 1, 2, 3).
    double p = table[5 * kWidth], m = 0, v = 0;
    for (int t = 1; t <= 3; ++t) {
        m = b1 * m + (1 - b1) * g;
        v = b2 * v + (1 - b2) * g * g;
        p -= 0.01 * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t)) * m / (std::sqrt(v) + 1e-8);
    }
    CHECK(now[5 * kWidth] == Approx(p).epsilon(1e-5));
    // Untouched rows are untouched.
    CHECK(std::equal(now.begin() + 7 * kWidth, now.end(), table.begin() + 7 * kWidth));
}

TEST_CASE("bf16 wire: pulled rows are the bf16 of psd's f32 rows; pushed rows are rounded once",
          "[psd][sparse][bf16]") {
    Cluster cluster(2, base_options(1));
    auto options = cluster.client_options(0, model(true));
    options.wire_bf16 = true;
    PsClient chief(options);
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    REQUIRE(chief.init(sgd(1.0f), ramp(n, 1.0f)));
    const auto table = table_init();
    const auto pulled = pull_table(chief);
    for (std::size_t i = 0; i < table.size(); ++i) REQUIRE(pulled[i] == wire::to_f32(wire::to_bf16(table[i])));
    const std::vector<std::uint32_t> ids{7};
    const std::vector<float> g(kWidth, 0.123456f);
    const RowGrads rows{1, ids, g};
    REQUIRE(chief.exchange(Exchange{.grads = std::vector<float>(n, 0.0f), .step = 0, .row_grads = {&rows, 1}}));
    // psd keeps f32: a plain f32 client sees table - bf16(g).
    PsClient plain(cluster.client_options(0, model(true)));
    REQUIRE(plain.hello());
    const auto f32 = pull_table(plain);
    for (std::size_t c = 0; c < kWidth; ++c)
        CHECK(f32[7 * kWidth + c] == table[7 * kWidth + c] - wire::to_f32(wire::to_bf16(0.123456f)));
}

TEST_CASE("bad ids and misuse are refused by the client before anything is sent", "[psd][sparse]") {
    Cluster cluster(2, base_options(1));
    PsClient chief(cluster.client_options(0, model(true)));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    REQUIRE(chief.init(sgd(1.0f), ramp(n, 1.0f)));
    const std::vector<std::uint32_t> bad{3, kRows};
    const RowRequest request{1, bad};
    PulledRows rows;
    auto r = chief.exchange(Exchange{.pulls = {&request, 1}, .rows = &rows});
    REQUIRE_FALSE(r);
    CHECK(r.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(r.error().message, Catch::Contains("row id 1000 of sparse table 'emb' is not below its 1000 rows"));
    const RowRequest dense_one{0, {bad.data(), 1}};
    r = chief.exchange(Exchange{.pulls = {&dense_one, 1}, .rows = &rows});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("not a sparse table"));
    const std::vector<float> short_values(3);
    const RowGrads short_grads{1, {bad.data(), 1}, short_values};
    r = chief.exchange(Exchange{.grads = std::vector<float>(n, 0.0f), .row_grads = {&short_grads, 1}});
    REQUIRE_FALSE(r);
    CHECK_THAT(r.error().message, Catch::Contains("1 ids need 8 values, got 3"));
    // Nothing reached psd: the table is as it started, and the client still works.
    CHECK(pull_table(chief) == table_init());
}

TEST_CASE("sparse SGD by hand: repeated ids summed, each row on the shard id mod 2", "[psd][sparse]") {
    Cluster cluster(2, base_options(1));
    PsClient chief(cluster.client_options(0, model(true)));
    REQUIRE(chief.hello());
    const std::size_t n = chief.layout().total;
    REQUIRE(chief.init(sgd(0.25f), std::vector<float>(n, 0.0f)));
    const auto table = table_init();
    // Ids 7 (twice), 10 and 3 (twice): rows 7 and 3 live on shard 1, row 10 on shard 0.
    const std::vector<std::uint32_t> ids{7, 10, 3, 7, 3};
    std::vector<float> values(ids.size() * kWidth);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = 0.125f * static_cast<float>(i % 11) - 0.5f;
    const RowGrads rows{1, ids, values};
    const std::vector<std::uint32_t> want{3, 10, 7, 11};
    const RowRequest request{1, want};
    PulledRows pulled;
    REQUIRE(chief.exchange(Exchange{.grads = std::vector<float>(n, 0.0f),
                                    .step = 0,
                                    .row_grads = {&rows, 1},
                                    .pulls = {&request, 1},
                                    .rows = &pulled}));
    auto expected = [&](std::uint32_t id, std::size_t c) {
        float sum = 0.0f;  // summed in the order given, as the client does
        for (std::size_t i = 0; i < ids.size(); ++i)
            if (ids[i] == id) sum += values[i * kWidth + c];
        return table[id * kWidth + c] - 0.25f * sum;
    };
    for (std::size_t r = 0; r < want.size(); ++r)
        for (std::size_t c = 0; c < kWidth; ++c) CHECK(pulled.rows(0)[r * kWidth + c] == expected(want[r], c));
    CHECK(pulled.rows(0)[3 * kWidth] == table[11 * kWidth]);  // row 11 was not pushed
    auto s0 = chief.stats(0), s1 = chief.stats(1);
    REQUIRE(s0);
    REQUIRE(s1);
    CHECK((*s0)["rows_pushed"] == 1);  // row 10
    CHECK((*s1)["rows_pushed"] == 2);  // rows 3 and 7, each once after the client summed the repeats
    CHECK((*s0)["row_floats"] == std::size_t{kRows / 2} * kWidth);
    CHECK((*s1)["row_floats"] == std::size_t{kRows / 2} * kWidth);
}

TEST_CASE("a shard refuses rows it does not own (row id mod K) and keeps serving", "[psd][sparse]") {
    Cluster cluster(2, base_options(1));
    PsClient chief(cluster.client_options(0, model(true)));
    REQUIRE(chief.hello());
    REQUIRE(chief.init(sgd(0.25f), std::vector<float>(chief.layout().total, 0.0f)));
    zmq::context_t context(1);
    zmq::socket_t dealer(context, zmq::socket_type::dealer);
    dealer.set(zmq::sockopt::linger, 0);
    dealer.set(zmq::sockopt::rcvtimeo, 5000);
    dealer.connect(cluster.endpoints()[1]);
    auto pull_from_shard1 = [&](std::uint32_t id) {
        wire::Header h;
        h.type = wire::MessageType::kPull;
        h.role = wire::Role::kWorker;
        h.frames.push_back(wire::FrameDesc{wire::row_frame_id(wire::RowPart::kPullIds, 1), 4});
        const std::string header = wire::encode_header(h);
        dealer.send(zmq::buffer(header), zmq::send_flags::sndmore);
        dealer.send(zmq::buffer(&id, 4), zmq::send_flags::none);
        std::vector<zmq::message_t> reply;
        for (;;) {
            zmq::message_t part;
            REQUIRE(dealer.recv(part));
            const bool more = part.more();
            reply.push_back(std::move(part));
            if (!more) break;
        }
        return reply;
    };
    const auto refused = pull_from_shard1(4);  // 4 mod 2 = 0: shard 0's row
    REQUIRE(refused.size() == 2);
    auto h = wire::decode_header(refused[0].to_string_view());
    REQUIRE(h);
    CHECK(h->type == wire::MessageType::kError);
    auto e = wire::decode_error(refused[1].to_string_view());
    REQUIRE(e);
    CHECK_THAT(e->reason, Catch::Contains("belongs to shard 0, not 1"));
    const auto served = pull_from_shard1(5);  // its own row: the initial values
    auto ok = wire::decode_header(served[0].to_string_view());
    REQUIRE(ok);
    CHECK(ok->type == wire::MessageType::kParams);
    REQUIRE(served.back().size() == kWidth * sizeof(float));
    std::vector<float> row(kWidth);
    std::memcpy(row.data(), served.back().data(), row.size() * sizeof(float));
    const auto table = table_init();
    CHECK(std::equal(row.begin(), row.end(), table.begin() + 5 * kWidth));
}
