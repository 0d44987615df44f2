// The pieces of psd's sparse tables without sockets: the row initializer, RowStore, and the
// row-frame parser's checks (psd/row_frames.h), each refusal naming what is wrong.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>

#include "common/param_groups.h"
#include "common/row_init.h"
#include "psd/row_frames.h"
#include "psd/row_store.h"

using namespace psrun;
using wire::FrameDesc;
using wire::MessageType;
using wire::RowPart;

namespace {

std::vector<TensorSpec> tensors() {
    std::vector<TensorSpec> t = {{"w", {4, 4}}, {"emb", {100, 3}}, {"tok", {50, 2}}};
    t[1].kind = TensorKind::kRows;
    t[1].row_init = RowInit{RowInitKind::kTruncatedNormal, 0.5f, 1};
    t[2].kind = TensorKind::kRows;
    return t;
}

zmq::message_t ids_frame(std::vector<std::uint32_t> ids) { return zmq::message_t(ids.data(), ids.size() * 4); }
zmq::message_t values_frame(std::size_t n, float v = 0.5f) {
    std::vector<float> values(n, v);
    return zmq::message_t(values.data(), n * 4);
}

struct Message {
    std::vector<FrameDesc> descs;
    std::vector<zmq::message_t> frames;
    void add(RowPart part, std::uint32_t tensor, zmq::message_t frame) {
        descs.push_back(FrameDesc{wire::row_frame_id(part, tensor), static_cast<std::uint32_t>(frame.size())});
        frames.push_back(std::move(frame));
    }
};

}  // namespace

TEST_CASE("row initializers are pure functions of (seed, row, col) with the documented distributions", "[sparse]") {
    const RowInit uniform{RowInitKind::kUniform, 0.25f, 3}, normal{RowInitKind::kNormal, 2.0f, 3},
        truncated{RowInitKind::kTruncatedNormal, 1.0f, 3};
    CHECK(row_init_value(uniform, 17, 2) == row_init_value(uniform, 17, 2));
    CHECK(row_init_value(uniform, 17, 2) != row_init_value(uniform, 18, 2));
    CHECK(row_init_value(uniform, 17, 2) != row_init_value(RowInit{RowInitKind::kUniform, 0.25f, 4}, 17, 2));
    CHECK(row_init_value(RowInit{}, 5, 5) == 0.0f);
    double sum = 0, sq = 0, max_u = 0, max_t = 0;
    const int n = 200000;
    for (int i = 0; i < n; ++i) {
        const double z = row_init_value(normal, static_cast<std::uint64_t>(i), 1);
        sum += z;
        sq += z * z;
        max_u = std::max(max_u, std::fabs(double(row_init_value(uniform, static_cast<std::uint64_t>(i), 0))));
        max_t = std::max(max_t, std::fabs(double(row_init_value(truncated, static_cast<std::uint64_t>(i), 0))));
    }
    CHECK(std::fabs(sum / n) < 0.02);
    CHECK(std::sqrt(sq / n) == Approx(2.0).epsilon(0.01));
    CHECK(max_u <= 0.25);
    CHECK(max_u > 0.249);
    CHECK(max_t <= 2.0);
    CHECK(max_t > 1.9);
}

// The header's formula written out again, value by value, as the first implementation computed it:
// every table ever initialised or checkpointed depends on these exact bits.
namespace {
float reference_value(const RowInit& init, std::uint64_t row, std::uint32_t col) {
    auto mix = [](std::uint64_t x) {
        x += 0x9E3779B97F4A7C15ull;
        x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
        x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
        return x ^ (x >> 31);
    };
    auto uniform = [&](std::uint32_t draw) {
        const std::uint64_t bits = mix(mix(mix(init.seed) ^ row) ^ ((std::uint64_t{draw} << 32) | col));
        return (static_cast<double>(bits >> 11) + 0.5) * 0x1.0p-53;
    };
    auto normal = [&](std::uint32_t draw) {
        const double u1 = uniform(2 * draw), u2 = uniform(2 * draw + 1);
        return std::sqrt(-2.0 * std::log(u1)) * std::cos(6.283185307179586 * u2);
    };
    switch (init.kind) {
        case RowInitKind::kZeros: return 0.0f;
        case RowInitKind::kUniform: return static_cast<float>((2.0 * uniform(0) - 1.0) * init.scale);
        case RowInitKind::kNormal: return static_cast<float>(normal(0) * init.scale);
        case RowInitKind::kTruncatedNormal:
            for (std::uint32_t draw = 0;; ++draw)
                if (const double z = normal(draw); std::fabs(z) <= 2.0) return static_cast<float>(z * init.scale);
    }
    return -1.0f;
}
}  // namespace

TEST_CASE("fill_row and row_init_value give the formula's values bit for bit, for every kind", "[sparse]") {
    for (const RowInit init :
         {RowInit{RowInitKind::kZeros, 1.0f, 9}, RowInit{RowInitKind::kUniform, 0.25f, 3},
          RowInit{RowInitKind::kNormal, 0.05f, 0xFFFFFFFFFFFFull}, RowInit{RowInitKind::kTruncatedNormal, 1.0f, 7}}) {
        std::vector<float> row(37, -5.0f);
        std::size_t differ = 0;
        for (std::uint64_t r : {0ull, 1ull, 2ull, 999ull, 123456789ull, 0x9E3779B97F4A7C15ull, ~0ull}) {
            fill_row(init, r, row);
            for (std::uint32_t c = 0; c < row.size(); ++c) {
                const float want = reference_value(init, r, c);
                differ += std::memcmp(&row[c], &want, sizeof(float)) != 0;
                const float single = row_init_value(init, r, c);
                differ += std::memcmp(&single, &want, sizeof(float)) != 0;
            }
        }
        INFO("kind " << static_cast<int>(init.kind));
        CHECK(differ == 0);
    }
}

TEST_CASE("RowStore holds its shard's rows: gather, apply and counts", "[psd][sparse]") {
    const auto t = tensors();
    const auto layout = *compute_layout(t, 3);
    psd::RowStore store(layout, 1, t);
    REQUIRE(store.size() == 2);
    CHECK(store.local_rows(0) == 33);  // rows 1, 4, ..., 97
    CHECK(store.local_rows(1) == 17);  // rows 1, 4, ..., 49
    store.init(OptimizerConfig{.kind = OptimizerKind::kAdagrad, .learning_rate = 0.1f, .adagrad_initial = 0.1f});
    CHECK(store.floats() == 33 * 3 + 17 * 2);
    CHECK(store.slot_floats() == store.floats());
    CHECK(store.rows_created() == 0);  // lazy: INIT creates no row
    const std::vector<std::uint32_t> ids{4, 97};
    std::vector<float> rows(6);
    store.gather(0, ids, rows.data());
    for (std::size_t i = 0; i < 2; ++i)
        for (std::uint32_t c = 0; c < 3; ++c) CHECK(rows[i * 3 + c] == row_init_value(t[1].row_init, ids[i], c));
    store.begin_update();
    const std::vector<float> g{1, 2, 3, 4, 5, 6};
    store.apply(0, ids, g);
    std::vector<float> after(6);
    store.gather(0, ids, after.data());
    for (std::size_t i = 0; i < 6; ++i) {
        const float a = 0.1f + g[i] * g[i];
        CHECK(after[i] == rows[i] - 0.1f * g[i] / std::sqrt(a));
    }
    CHECK(store.updates(0) == 1);
    CHECK(store.updates(1) == 1);  // every table counts every update
    CHECK(store.rows_created() == 2);
    // A row first touched by a push starts from its initial values and Adagrad's initial accumulator.
    const std::vector<std::uint32_t> fresh{10};
    store.apply(0, fresh, std::vector<float>{2, 0, -2});
    std::vector<float> row(3);
    store.gather(0, fresh, row.data());
    for (std::uint32_t c = 0; c < 3; ++c) {
        const float grad = c == 0 ? 2.0f : c == 1 ? 0.0f : -2.0f;
        CHECK(row[c] == row_init_value(t[1].row_init, 10, c) - 0.1f * grad / std::sqrt(0.1f + grad * grad));
    }
    CHECK(store.rows_created() == 3);
    // materialize() creates the rest (what a checkpoint reads) and leaves the touched rows alone.
    store.materialize(nullptr);
    CHECK(store.rows_created() == 33 + 17);
    const auto values = store.values(0);
    CHECK(values[row_index(10, 3) * 3] == row[0]);
    CHECK(values[row_index(97, 3) * 3 + 2] == after[5]);
    CHECK(values[row_index(7, 3) * 3 + 1] == row_init_value(t[1].row_init, 7, 1));
    CHECK(store.slots(0)[0][row_index(7, 3) * 3] == 0.1f);
    CHECK(store.values(1)[row_index(49, 3) * 2] == row_init_value(t[2].row_init, 49, 0));
}

TEST_CASE("row frames are checked before anything is applied", "[psd][sparse]") {
    const auto t = tensors();
    const auto layout = *compute_layout(t, 2);  // shard 0 owns the even rows
    std::vector<std::uint32_t> id_spare;
    std::vector<std::uint64_t> key_spare;
    std::vector<float> value_spare;
    auto parse = [&](Message& m, MessageType type = MessageType::kPushPull, PayloadForm form = PayloadForm::kF32) {
        return psd::parse_row_frames(layout, t, 0, type, form, m.descs, m.frames, id_spare, key_spare, value_spare);
    };
    auto refused = [&](Message& m, const std::string& what, MessageType type = MessageType::kPushPull) {
        auto r = parse(m, type);
        REQUIRE_FALSE(r);
        CHECK(r.error().code == ErrorCode::kProtocol);
        CHECK_THAT(r.error().message, Catch::Contains(what));
    };
    {
        Message m;
        m.add(RowPart::kGradIds, 1, ids_frame({0, 4, 98}));
        m.add(RowPart::kGradValues, 1, values_frame(9));
        m.add(RowPart::kGradIds, 2, ids_frame({2}));
        m.add(RowPart::kGradValues, 2, values_frame(2, -1.0f));
        m.add(RowPart::kPullIds, 1, ids_frame({6, 8}));
        auto r = parse(m);
        REQUIRE(r);
        REQUIRE(r->grads.size() == 2);
        CHECK(r->grads[0].table == 0);
        CHECK(r->grads[0].ids.size() == 3);
        CHECK(r->grads[0].values.size() == 9);
        CHECK(r->grads[1].values[1] == -1.0f);
        REQUIRE(r->pulls.size() == 1);
        CHECK(r->pulls[0].ids[1] == 8);
    }
    {
        Message m;  // bf16 values: 2 bytes each, expanded
        m.add(RowPart::kGradIds, 2, ids_frame({2}));
        const std::uint16_t bf16[2] = {0x3F80, 0xC000};  // 1.0, -2.0
        m.add(RowPart::kGradValues, 2, zmq::message_t(bf16, 4));
        auto r = parse(m, MessageType::kPush, PayloadForm::kBf16);
        REQUIRE(r);
        CHECK(r->grads[0].values[0] == 1.0f);
        CHECK(r->grads[0].values[1] == -2.0f);
    }
    Message descending;
    descending.add(RowPart::kPullIds, 1, ids_frame({4, 2}));
    refused(descending, "not strictly ascending");
    Message repeated;
    repeated.add(RowPart::kPullIds, 1, ids_frame({2, 2}));
    refused(repeated, "not strictly ascending");
    Message too_big;
    too_big.add(RowPart::kPullIds, 2, ids_frame({50}));
    refused(too_big, "row id 50 of 'tok' is not below its 50 rows");
    Message other_shard;
    other_shard.add(RowPart::kPullIds, 1, ids_frame({3}));
    refused(other_shard, "belongs to shard 1, not 0");
    Message dense_tensor;
    dense_tensor.add(RowPart::kPullIds, 0, ids_frame({0}));
    refused(dense_tensor, "not a sparse table");
    Message no_values;
    no_values.add(RowPart::kGradIds, 1, ids_frame({0}));
    refused(no_values, "not followed by their values");
    Message short_values;
    short_values.add(RowPart::kGradIds, 1, ids_frame({0}));
    short_values.add(RowPart::kGradValues, 1, values_frame(2));
    refused(short_values, "1 rows of 3 take exactly 12");
    Message pull_in_push;
    pull_in_push.add(RowPart::kPullIds, 1, ids_frame({0}));
    refused(pull_in_push, "pulled in a PUSH", MessageType::kPush);
    Message grad_in_pull;
    grad_in_pull.add(RowPart::kGradIds, 1, ids_frame({0}));
    grad_in_pull.add(RowPart::kGradValues, 1, values_frame(3));
    refused(grad_in_pull, "in a PULL", MessageType::kPull);
    Message twice;
    twice.add(RowPart::kPullIds, 1, ids_frame({0}));
    twice.add(RowPart::kPullIds, 1, ids_frame({2}));
    refused(twice, "once each, in tensor order");
    Message grads_after_pulls;
    grads_after_pulls.add(RowPart::kPullIds, 1, ids_frame({0}));
    grads_after_pulls.add(RowPart::kGradIds, 2, ids_frame({0}));
    grads_after_pulls.add(RowPart::kGradValues, 2, values_frame(2));
    refused(grads_after_pulls, "after the pulled rows");
    Message empty_ids;
    empty_ids.add(RowPart::kPullIds, 1, zmq::message_t());
    refused(empty_ids, "uint32 ids");
    Message odd_bytes;
    odd_bytes.add(RowPart::kPullIds, 1, zmq::message_t(std::string("abcde").data(), 5));
    refused(odd_bytes, "uint32 ids");
    Message reply_values;
    reply_values.add(RowPart::kValues, 1, values_frame(3));
    refused(reply_values, "reply's values");
}

TEST_CASE("a sparse table's --param-group sets its rows' learning rate and decay", "[psd][sparse][groups]") {
    const auto t = tensors();
    const auto layout = *compute_layout(t, 1);
    OptimizerConfig c{.kind = OptimizerKind::kSgd, .learning_rate = 0.5f};
    c.groups = {*parse_param_group("emb:lr_mult=0.25,weight_decay=0.1")};
    psd::RowStore store(layout, 0, t);
    store.init(c);
    const std::vector<std::uint32_t> ids{3};
    std::vector<float> before(3), after(3), tok_before(2), tok_after(2);
    store.gather(0, ids, before.data());
    store.gather(1, ids, tok_before.data());
    store.begin_update();
    store.apply(0, ids, std::vector<float>{1, 1, 1});
    store.apply(1, ids, std::vector<float>{1, 1});
    store.gather(0, ids, after.data());
    store.gather(1, ids, tok_after.data());
    for (int i = 0; i < 3; ++i) CHECK(after[i] == before[i] - 0.5f * 0.25f * (1.0f + 0.1f * before[i]));
    for (int i = 0; i < 2; ++i) CHECK(tok_after[i] == tok_before[i] - 0.5f * 1.0f);  // no group: lr 0.5, no decay
}

TEST_CASE("lamb moves each pushed row by its own trust ratio, as a [1, width] tensor", "[psd][sparse][lamb]") {
    const auto t = tensors();
    const auto layout = *compute_layout(t, 2);
    const OptimizerConfig c{.kind = OptimizerKind::kLamb, .learning_rate = 0.05f, .weight_decay = 0.01f};
    psd::RowStore store(layout, 1, t);  // rows 1, 3, 5, ... of emb [100, 3]
    store.init(c);
    const std::vector<std::uint32_t> ids{3, 41};
    std::vector<float> rows(6);
    store.gather(0, ids, rows.data());
    const std::vector<float> start = rows;
    // The reference: one optimizer per row, the table's configuration (rank 2: it decays).
    std::vector<Optimizer> per_row;
    for (int i = 0; i < 2; ++i) per_row.emplace_back(c.for_tensor("emb", 2), 3);
    for (int s = 0; s < 3; ++s) {
        const std::vector<float> g{0.5f, -0.25f + 0.1f * float(s), 1.0f, 2.0f * float(s), 0.125f, -1.0f};
        store.begin_update();
        store.apply(0, ids, g);
        for (std::size_t i = 0; i < 2; ++i)
            per_row[i].apply(std::span<float>(rows.data() + 3 * i, 3), std::span<const float>(g.data() + 3 * i, 3),
                             true);
    }
    std::vector<float> after(6);
    store.gather(0, ids, after.data());
    CHECK(after == rows);
    // Not one trust ratio for both rows: LAMB over the two rows as one tensor lands elsewhere.
    std::vector<float> together = start;
    Optimizer both(c.for_tensor("emb", 2), 6);
    for (int s = 0; s < 3; ++s) {
        const std::vector<float> g{0.5f, -0.25f + 0.1f * float(s), 1.0f, 2.0f * float(s), 0.125f, -1.0f};
        both.apply(together, g, true);
    }
    CHECK(together != rows);
}
