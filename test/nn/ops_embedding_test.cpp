// The lookup kinds (workerd/nn/ops/embedding.cpp): embedding and gather against naive loops
// (forward and the scatter-add backward, repeated ids and indices, batch 1 and 3, f32 and
// bf16), finite differences, bf16 against f32, the out-of-vocabulary error, determinism of the
// table gradient across thread counts, and the parse errors.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <stdexcept>

#include "test/nn/engine_test_util.h"
#include "workerd/nn/parameter_init.h"

namespace psrun::nn::test::ops_embedding_test {
namespace {

using nlohmann::json;

float bf16_round(float x) {
    std::uint32_t u;
    std::memcpy(&u, &x, sizeof u);
    u = (u + 0x7fffu + ((u >> 16) & 1u)) & 0xffff0000u;
    std::memcpy(&x, &u, sizeof u);
    return x;
}

struct Run {
    std::vector<float> y, grads, dx;
};

// One forward (training) and backward from dy of the whole model.
Run run(const ModelDescription& model, std::int64_t batch, Precision precision, const std::vector<float>& params,
        const std::vector<float>& x, const std::vector<std::int32_t>& ids, const std::vector<float>& dy) {
    std::vector<float> grads(params.size(), -7.0f);
    auto net = Network::create(
        model, NetworkOptions{batch, precision, false, false, model.input().type == ElementType::kFloat}, params,
        grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    (*net)->forward(true, 1);
    Run r{{(*net)->outputs().begin(), (*net)->outputs().end()}, {}, {}};
    (*net)->backward_from(dy);
    r.grads = grads;
    r.dx.assign((*net)->input_gradient().begin(), (*net)->input_gradient().end());
    return r;
}

std::vector<std::int32_t> random_ids(std::size_t n, int vocabulary, std::uint64_t seed) {
    psrun::Rng rng(seed);
    std::vector<std::int32_t> ids(n);
    for (auto& i : ids) i = static_cast<std::int32_t>(rng.below(static_cast<std::uint64_t>(vocabulary)));
    return ids;
}

}  // namespace

TEST_CASE("embedding: rows by id, and the table gradient a scatter-add of repeated ids", "[nn_engine][sequence]") {
    const auto shape = GENERATE(std::vector<std::int64_t>{5}, std::vector<std::int64_t>{2, 3});
    const std::int64_t batch = GENERATE(1, 3);
    const auto precision = GENERATE(from_range(test_precisions("embedding")));
    CAPTURE(shape, batch, to_string(precision));
    const int vocabulary = 6, dim = 5;  // fewer ids than positions: repeats are certain
    const auto model =
        graph_model(json::array({{{"kind", "embedding"}, {"name", "emb"}, {"vocabulary", vocabulary}, {"dim", dim}}}),
                    shape, "int");
    REQUIRE(model.tensors.size() == 1);
    CHECK(model.tensors[0].name == "emb/table");
    CHECK(model.tensors[0].shape == std::vector<std::int64_t>{vocabulary, dim});
    std::int64_t positions = batch;
    for (const auto d : shape) positions *= d;
    auto params = random_vector(static_cast<std::size_t>(vocabulary * dim), 3);
    const auto ids = random_ids(static_cast<std::size_t>(positions), vocabulary, 4);
    const auto dy = random_vector(static_cast<std::size_t>(positions * dim), 5);
    const Run r = run(model, batch, precision, params, {}, ids, dy);
    std::vector<double> y, dtable(params.size(), 0.0);
    for (std::int64_t p = 0; p < positions; ++p)
        for (int j = 0; j < dim; ++j) {
            const float v = params[static_cast<std::size_t>(ids[static_cast<std::size_t>(p)] * dim + j)];
            y.push_back(precision == Precision::kBf16 ? bf16_round(v) : v);
            // bf16: the output's gradient is held in bf16 (the activation type) before the scatter.
            const float g = dy[static_cast<std::size_t>(p * dim + j)];
            dtable[static_cast<std::size_t>(ids[static_cast<std::size_t>(p)] * dim + j)] +=
                precision == Precision::kBf16 ? bf16_round(g) : g;
        }
    CHECK(rel_l2(r.y, y) == 0.0);  // a copy (bf16: the rounded row)
    CHECK(rel_l2(r.grads, dtable) < 1e-6);
    int untouched = 0;  // ids never looked up get exactly 0, not what the buffer held
    for (int v = 0; v < vocabulary; ++v)
        if (std::find(ids.begin(), ids.end(), v) == ids.end()) {
            ++untouched;
            for (int j = 0; j < dim; ++j) CHECK(r.grads[static_cast<std::size_t>(v * dim + j)] == 0.0f);
        }
    INFO(untouched << " ids never looked up");
}

TEST_CASE("embedding: the table gradient is the same bit for bit with 1, 2 and 3 threads", "[nn_engine][sequence]") {
    const auto model =
        graph_model(json::array({{{"kind", "embedding"}, {"vocabulary", 50}, {"dim", 16}}}), {40}, "int");
    const std::int64_t batch = 8;
    const auto params = random_vector(50 * 16, 6);
    const auto ids = random_ids(static_cast<std::size_t>(batch * 40), 50, 7);
    const auto dy = random_vector(static_cast<std::size_t>(batch * 40 * 16), 8, 1e3);  // large values: order shows
    const int saved = omp_get_max_threads();
    std::vector<std::vector<float>> grads;
    for (const int threads : {1, 2, 3}) {
        omp_set_num_threads(threads);
        grads.push_back(run(model, batch, Precision::kF32, params, {}, ids, dy).grads);
    }
    omp_set_num_threads(saved);
    CHECK(std::memcmp(grads[0].data(), grads[1].data(), grads[0].size() * sizeof(float)) == 0);
    CHECK(std::memcmp(grads[0].data(), grads[2].data(), grads[0].size() * sizeof(float)) == 0);
}

TEST_CASE("embedding: an id outside the vocabulary stops the step naming the example", "[nn_engine][sequence]") {
    const auto model = graph_model(json::array({{{"kind", "embedding"}, {"vocabulary", 10}, {"dim", 4}}}), {3}, "int");
    std::vector<float> params(40, 0.5f), grads(40);
    auto net = Network::create(model, NetworkOptions{3, Precision::kF32}, params, grads);
    REQUIRE(net);
    const std::int32_t bad = GENERATE(10, -1);
    std::vector<std::int32_t> ids{1, 2, 3, 4, 5, 6, 7, bad, 9};
    std::copy(ids.begin(), ids.end(), (*net)->input_ids().begin());
    std::fill((*net)->targets().begin(), (*net)->targets().end(), 0.0f);
    try {
        (*net)->train_step(1);
        FAIL("no error");
    } catch (const std::out_of_range& e) {
        const std::string message = e.what();
        CHECK(message == "id " + std::to_string(bad) + " at position 1 of example 2 is outside the vocabulary [0, 10)");
    }
}

TEST_CASE("embedding: gradients by finite differences, and bf16 near f32", "[nn_engine][sequence]") {
    // Through a dense layer, so the table's gradient depends on the lookups.
    const auto model = graph_model(
        json::array({{{"kind", "embedding"}, {"vocabulary", 9}, {"dim", 6}}, {{"kind", "dense"}, {"units", 4}}}),
        {2, 3}, "int");
    check_gradients(model, 3, 11, 24, 2e-2, 0, 9);
    check_gradients(model, 1, 12, 24, 2e-2, 0, 9);
    check_bf16_against_f32(model, 3, 13, 3e-2, 9);
}

TEST_CASE("gather: constant indices along an axis, repeated ones summed in the gradient", "[nn_engine][sequence]") {
    struct Case {
        std::vector<std::int64_t> shape;
        std::int64_t axis;
        json indices;
    };
    const auto c = GENERATE(Case{{4, 3}, 1, -1}, Case{{4, 3}, -2, json::array({0, 2, 0, -1})}, Case{{2, 3, 5}, 3, 4},
                            Case{{5}, 1, json::array({4, 4, 1})});
    const std::int64_t batch = GENERATE(1, 3);
    const auto precision = GENERATE(from_range(test_precisions("embedding")));
    CAPTURE(c.shape, c.axis, c.indices.dump(), batch, to_string(precision));
    const auto model =
        graph_model(json::array({{{"kind", "gather"}, {"axis", c.axis}, {"indices", c.indices}}}), c.shape);
    std::vector<std::int64_t> dims{batch};
    dims.insert(dims.end(), c.shape.begin(), c.shape.end());
    const auto rank = static_cast<std::int64_t>(dims.size());
    const std::int64_t axis = c.axis < 0 ? c.axis + rank : c.axis;
    std::int64_t outer = 1, inner = 1;
    for (std::int64_t i = 0; i < axis; ++i) outer *= dims[static_cast<std::size_t>(i)];
    for (std::int64_t i = axis + 1; i < rank; ++i) inner *= dims[static_cast<std::size_t>(i)];
    const std::int64_t along = dims[static_cast<std::size_t>(axis)];
    std::vector<std::int64_t> list = c.indices.is_array() ? c.indices.get<std::vector<std::int64_t>>()
                                                          : std::vector<std::int64_t>{c.indices.get<std::int64_t>()};
    for (auto& i : list) i = i < 0 ? i + along : i;
    auto x = random_vector(static_cast<std::size_t>(outer * along * inner), 21);
    if (precision == Precision::kBf16)
        for (auto& v : x) v = bf16_round(v);
    const auto count = static_cast<std::int64_t>(list.size());
    const auto dy = random_vector(static_cast<std::size_t>(outer * count * inner), 22);
    const Run r = run(model, batch, precision, {}, x, {}, dy);
    std::vector<double> y, dx(x.size(), 0.0);
    for (std::int64_t o = 0; o < outer; ++o)
        for (std::int64_t k = 0; k < count; ++k)
            for (std::int64_t j = 0; j < inner; ++j) {
                const auto from = static_cast<std::size_t>((o * along + list[static_cast<std::size_t>(k)]) * inner + j);
                y.push_back(x[from]);
                dx[from] += dy[static_cast<std::size_t>((o * count + k) * inner + j)];
            }
    CHECK(rel_l2(r.y, y) == 0.0);
    CHECK(rel_l2(r.dx, dx) < (precision == Precision::kBf16 ? 1e-2 : 1e-6));
}

TEST_CASE("gather: gradients by finite differences, and bf16 near f32", "[nn_engine][sequence]") {
    const auto model =
        graph_model(json::array({{{"kind", "dense"}, {"units", 5}},
                                 {{"kind", "gather"}, {"axis", 1}, {"indices", json::array({3, 0, 3})}}}),
                    {4, 3});
    check_gradients(model, 3, 31);
    check_bf16_against_f32(model, 3, 32);
}

TEST_CASE("embedding and gather: errors name what is wrong", "[nn_engine][sequence]") {
    auto error = [](const json& layers, const std::vector<std::int64_t>& shape, const char* type) {
        const json doc{{"input", {{"shape", shape}, {"type", type}}},
                       {"layers", layers},
                       {"loss", {{"kind", "mean_squared_error"}}}};
        auto model = parse_model(doc, "m");
        REQUIRE_FALSE(model);
        return model.error().message;
    };
    using Catch::Matchers::Contains;
    CHECK_THAT(error(json::array({{{"kind", "embedding"}, {"vocabulary", 5}, {"dim", 3}}}), {4}, "float"),
               Contains("expects int ids [N, ...], got float N x 4"));
    CHECK_THAT(error(json::array({{{"kind", "embedding"}, {"vocabulary", 0}, {"dim", 3}}}), {4}, "int"),
               Contains("field \"vocabulary\""));
    CHECK_THAT(error(json::array({{{"kind", "embedding"}, {"dim", 3}}}), {4}, "int"), Contains("vocabulary"));
    CHECK_THAT(
        error(json::array({{{"kind", "embedding"}, {"vocabulary", 5}, {"dim", 3}, {"init", "bogus"}}}), {4}, "int"),
        Contains("field \"init\""));
    CHECK_THAT(error(json::array({{{"kind", "gather"}, {"axis", 0}, {"indices", 0}}}), {4}, "float"),
               Contains("is the batch axis"));
    CHECK_THAT(error(json::array({{{"kind", "gather"}, {"axis", 1}, {"indices", 4}}}), {4}, "float"),
               Contains("index 4 is outside [-4, 4)"));
    CHECK_THAT(error(json::array({{{"kind", "gather"}, {"axis", 3}, {"indices", 0}}}), {4}, "float"),
               Contains("axis 3 is outside the input's 2 dims"));
    CHECK_THAT(error(json::array({{{"kind", "gather"}, {"axis", 1}, {"indices", json::array()}}}), {4}, "float"),
               Contains("field \"indices\": expected an integer or a list"));
    CHECK_THAT(error(json::array({{{"kind", "gather"}, {"axis", 1}}}), {4}, "float"),
               Contains("field \"indices\": missing"));
    CHECK_THAT(
        error(json::array({{{"kind", "embedding"}, {"vocabulary", 5}, {"dim", 3}, {"padding_index", 5}}}), {4}, "int"),
        Contains("field \"padding_index\""));
}

TEST_CASE("embedding: padding_index (PyTorch's padding_idx) starts at zero and gets no gradient",
          "[nn_engine][sequence]") {
    const auto precision = GENERATE(from_range(test_precisions("embedding")));
    CAPTURE(to_string(precision));
    const int vocabulary = 6, dim = 4, padding = 2;
    const auto model = graph_model(json::array({{{"kind", "embedding"},
                                                 {"name", "emb"},
                                                 {"vocabulary", vocabulary},
                                                 {"dim", dim},
                                                 {"padding_index", padding}}}),
                                   {5}, "int");
    // Without the field the description (and its hash) is as before.
    const auto plain = graph_model(
        json::array({{{"kind", "embedding"}, {"name", "emb"}, {"vocabulary", vocabulary}, {"dim", dim}}}), {5}, "int");
    CHECK_FALSE(plain.nodes[0].attrs.contains("padding_index"));
    CHECK(model.nodes[0].attrs.at("padding_index") == padding);
    std::vector<float> initial(static_cast<std::size_t>(vocabulary * dim));
    initialize_parameters(model, 9, initial);
    for (int r = 0; r < vocabulary; ++r) {
        const bool zero =
            std::all_of(initial.begin() + r * dim, initial.begin() + (r + 1) * dim, [](float v) { return v == 0.0f; });
        CHECK(zero == (r == padding));
    }
    auto params = random_vector(static_cast<std::size_t>(vocabulary * dim), 3);  // row 2 not zero: it is read
    const std::int64_t batch = 3;
    auto ids = random_ids(15, vocabulary, 4);
    ids[0] = ids[7] = padding;
    const auto dy = random_vector(15 * dim, 5);
    const Run r = run(model, batch, precision, params, {}, ids, dy);
    for (int j = 0; j < dim; ++j) {
        CHECK(r.y[static_cast<std::size_t>(j)] == Approx(params[padding * dim + j]).epsilon(1e-2));
        CHECK(r.grads[static_cast<std::size_t>(padding * dim + j)] == 0.0f);
    }
    // The other rows' gradients are the scatter-add as without the field.
    const Run without = run(plain, batch, precision, params, {}, ids, dy);
    for (std::size_t i = 0; i < r.grads.size(); ++i)
        if (static_cast<int>(i) / dim != padding) CHECK(r.grads[i] == without.grads[i]);
}

}  // namespace psrun::nn::test::ops_embedding_test
