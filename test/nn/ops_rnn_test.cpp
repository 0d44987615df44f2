// The recurrent kinds (workerd/nn/ops/rnn.cpp): lstm, gru (linear before reset or not) and rnn
// (tanh or relu) in
// every direction, sequence or batch first, with zero or given initial states, against a naive
// loop computed in double: the outputs Y, Y_h and Y_c, and every gradient (the tensors', the
// input's, through the initial states too) against central differences of that loop. Then
// finite differences on the engine itself, bf16 against f32, ONNX's layout against PyTorch's,
// and the parse errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "test/nn/engine_test_util.h"

namespace psrun::nn::test::ops_rnn_test {
namespace {

using nlohmann::json;

struct RnnCase {
    const char* kind;  // "lstm", "gru", "gru0" (linear_before_reset false), "rnn" (tanh), "rnn_relu"
    const char* direction;
    bool batch_first;
    bool states;  // h0 (and c0) computed from the input
    int output;   // 0: Y, 1: Y_h, 2: Y_c
    std::int64_t batch;
};

constexpr std::int64_t kL = 3, kI = 4, kH = 4;  // I == H: the states can be slices of the input

// The model: input x [N, L, I]; the layer reads x (transposed unless batch_first) and, with
// states, h0[d] = x[:, d, :] and c0[d] = x[:, L-1-d, :]; the output (transposed to batch
// first) is flattened.
ModelDescription rnn_model(const RnnCase& c, const char* layout = "pytorch", bool bias = true) {
    const bool lstm = std::string(c.kind) == "lstm";
    const int dirs = std::string(c.direction) == "bidirectional" ? 2 : 1;
    json layers = json::array();
    std::string seq = "input";
    if (!c.batch_first) {
        layers.push_back({{"kind", "transpose"}, {"name", "seq"}, {"inputs", {"input"}}, {"perm", {1, 0, 2}}});
        seq = "seq";
    }
    json inputs = {seq};
    if (c.states) {
        json h_idx = json::array(), c_idx = json::array();
        for (int d = 0; d < dirs; ++d) {
            h_idx.push_back(d);
            c_idx.push_back(kL - 1 - d);
        }
        layers.push_back(
            {{"kind", "gather"}, {"name", "h_rows"}, {"inputs", {"input"}}, {"axis", 1}, {"indices", h_idx}});
        layers.push_back({{"kind", "transpose"}, {"name", "h0"}, {"perm", {1, 0, 2}}});
        inputs.push_back("h0");
        if (lstm) {
            layers.push_back(
                {{"kind", "gather"}, {"name", "c_rows"}, {"inputs", {"input"}}, {"axis", 1}, {"indices", c_idx}});
            layers.push_back({{"kind", "transpose"}, {"name", "c0"}, {"perm", {1, 0, 2}}});
            inputs.push_back("c0");
        }
    }
    const std::string kind = c.kind;
    const bool plain = kind.starts_with("rnn");
    json layer = {{"kind", lstm    ? "lstm"
                           : plain ? "rnn"
                                   : "gru"},
                  {"name", "rnn"},
                  {"inputs", inputs},
                  {"hidden", kH},
                  {"direction", c.direction},
                  {"batch_first", c.batch_first},
                  {"layout", layout},
                  {"bias", bias}};
    if (plain) layer["activation"] = kind == "rnn_relu" ? "relu" : "tanh";
    else if (!lstm) layer["linear_before_reset"] = kind == "gru";
    layers.push_back(layer);
    if (c.output == 0 && !c.batch_first) layers.push_back({{"kind", "transpose"}, {"perm", {2, 0, 1, 3}}});
    if (c.output > 0)
        layers.push_back({{"kind", "transpose"}, {"inputs", {"rnn:" + std::to_string(c.output)}}, {"perm", {1, 0, 2}}});
    return graph_model(layers, {kL, kI});
}

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

// The reference on x [N][L][I] and the model's tensors (layout "pytorch"); the model's output
// order: Y as [N][L][D][H], Y_h and Y_c as [N][D][H].
std::vector<double> reference(const RnnCase& c, const ModelDescription& m, const std::vector<double>& x,
                              const std::vector<double>& p) {
    const std::string kind = c.kind;
    const bool lstm = kind == "lstm";
    const int dirs = std::string(c.direction) == "bidirectional" ? 2 : 1;
    const bool plain = kind.starts_with("rnn");
    const std::int64_t n_ex = c.batch, G = lstm ? 4 : plain ? 1 : 3;
    std::vector<double> y(static_cast<std::size_t>(n_ex * kL * dirs * kH)),
        hn(static_cast<std::size_t>(n_ex * dirs * kH)), cn(hn.size());
    auto tensor = [&](const std::string& name) -> const double* {
        const TensorDef* t = m.tensor(name);
        REQUIRE(t != nullptr);
        return p.data() + t->offset;
    };
    for (int d = 0; d < dirs; ++d) {
        const std::string suffix = d == 1 ? "_reverse" : "";
        const double *wi = tensor("rnn/w_ih" + suffix), *wh = tensor("rnn/w_hh" + suffix);
        const double *bi = tensor("rnn/b_ih" + suffix), *bh = tensor("rnn/b_hh" + suffix);
        const bool backwards = d == 1 || std::string(c.direction) == "reverse";
        for (std::int64_t n = 0; n < n_ex; ++n) {
            std::vector<double> h(kH, 0.0), cs(kH, 0.0);
            if (c.states)
                for (std::int64_t j = 0; j < kH; ++j) {
                    h[static_cast<std::size_t>(j)] = x[static_cast<std::size_t>((n * kL + d) * kI + j)];
                    if (lstm)
                        cs[static_cast<std::size_t>(j)] = x[static_cast<std::size_t>((n * kL + kL - 1 - d) * kI + j)];
                }
            for (std::int64_t step = 0; step < kL; ++step) {
                const std::int64_t t = backwards ? kL - 1 - step : step;
                const double* xt = x.data() + (n * kL + t) * kI;
                std::vector<double> ax(static_cast<std::size_t>(G * kH)), ah(ax.size());
                for (std::int64_t r = 0; r < G * kH; ++r) {
                    double sx = bi[r], sh = bh[r];
                    for (std::int64_t i = 0; i < kI; ++i) sx += wi[r * kI + i] * xt[i];
                    for (std::int64_t k = 0; k < kH; ++k) sh += wh[r * kH + k] * h[static_cast<std::size_t>(k)];
                    ax[static_cast<std::size_t>(r)] = sx;
                    ah[static_cast<std::size_t>(r)] = sh;
                }
                std::vector<double> next(kH);
                if (lstm)
                    for (std::int64_t j = 0; j < kH; ++j) {
                        auto a = [&](std::int64_t g) {
                            return ax[static_cast<std::size_t>(g * kH + j)] + ah[static_cast<std::size_t>(g * kH + j)];
                        };
                        const auto uj = static_cast<std::size_t>(j);
                        const double i = sigmoid(a(0)), f = sigmoid(a(1)), g = std::tanh(a(2)), o = sigmoid(a(3));
                        cs[uj] = f * cs[uj] + i * g;
                        next[uj] = o * std::tanh(cs[uj]);
                    }
                if (plain)
                    for (std::int64_t j = 0; j < kH; ++j) {
                        const double a = ax[static_cast<std::size_t>(j)] + ah[static_cast<std::size_t>(j)];
                        next[static_cast<std::size_t>(j)] = kind == "rnn" ? std::tanh(a) : std::max(a, 0.0);
                    }
                if (!lstm && !plain) {
                    // r for every unit first (the original GRU needs r * h over all units).
                    std::vector<double> r(kH), z(kH);
                    for (std::int64_t j = 0; j < kH; ++j) {
                        const auto uj = static_cast<std::size_t>(j);
                        r[uj] = sigmoid(ax[uj] + ah[uj]);
                        z[uj] = sigmoid(ax[static_cast<std::size_t>(kH + j)] + ah[static_cast<std::size_t>(kH + j)]);
                    }
                    for (std::int64_t j = 0; j < kH; ++j) {
                        const auto uj = static_cast<std::size_t>(j);
                        double pre = ax[static_cast<std::size_t>(2 * kH + j)];
                        if (kind == "gru") {
                            pre += r[uj] * ah[static_cast<std::size_t>(2 * kH + j)];
                        } else {
                            pre += bh[2 * kH + j];
                            for (std::int64_t k = 0; k < kH; ++k)
                                pre += wh[(2 * kH + j) * kH + k] * r[static_cast<std::size_t>(k)] *
                                       h[static_cast<std::size_t>(k)];
                        }
                        next[uj] = (1.0 - z[uj]) * std::tanh(pre) + z[uj] * h[uj];
                    }
                }
                h = next;
                for (std::int64_t j = 0; j < kH; ++j)
                    y[static_cast<std::size_t>(((n * kL + t) * dirs + d) * kH + j)] = h[static_cast<std::size_t>(j)];
            }
            for (std::int64_t j = 0; j < kH; ++j) {
                hn[static_cast<std::size_t>((n * dirs + d) * kH + j)] = h[static_cast<std::size_t>(j)];
                cn[static_cast<std::size_t>((n * dirs + d) * kH + j)] = cs[static_cast<std::size_t>(j)];
            }
        }
    }
    return c.output == 0 ? y : c.output == 1 ? hn : cn;
}

struct Run {
    std::vector<float> y, grads, dx;
};

Run run(const ModelDescription& model, std::int64_t batch, Precision precision, const std::vector<float>& params,
        const std::vector<float>& x, const std::vector<float>& dy) {
    std::vector<float> grads(params.size(), -7.0f);
    auto net = Network::create(model, NetworkOptions{batch, precision, false, false, true}, params, grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    std::copy(x.begin(), x.end(), (*net)->input().begin());
    (*net)->forward(true, 1);
    Run r{{(*net)->outputs().begin(), (*net)->outputs().end()}, {}, {}};
    (*net)->backward_from(dy);
    r.grads = grads;
    r.dx.assign((*net)->input_gradient().begin(), (*net)->input_gradient().end());
    return r;
}

double dot(const std::vector<double>& a, const std::vector<float>& b) {
    double s = 0;
    for (std::size_t i = 0; i < a.size(); ++i) s += a[i] * b[i];
    return s;
}

std::vector<RnnCase> cases() {
    std::vector<RnnCase> out;
    for (const char* kind : {"lstm", "gru", "gru0", "rnn", "rnn_relu"})
        for (const char* direction : {"forward", "reverse", "bidirectional"}) {
            out.push_back({kind, direction, false, false, 0, 3});
            out.push_back({kind, direction, true, true, 0, 1});
            out.push_back({kind, direction, false, true, 1, 3});
            if (std::string(kind) == "lstm") out.push_back({kind, direction, true, false, 2, 3});
        }
    return out;
}

}  // namespace

TEST_CASE("lstm, gru and rnn match a loop in double: outputs and every gradient", "[nn_engine][sequence]") {
    const auto c = GENERATE(from_range(cases()));
    CAPTURE(c.kind, c.direction, c.batch_first, c.states, c.output, c.batch);
    const auto model = rnn_model(c);
    const auto params = random_vector(static_cast<std::size_t>(model.parameter_count), 41, 0.8);
    const auto x = random_vector(static_cast<std::size_t>(c.batch * kL * kI), 42);
    const std::vector<double> xd(x.begin(), x.end()), pd(params.begin(), params.end());
    const auto ref = reference(c, model, xd, pd);
    const auto dy = random_vector(ref.size(), 43);
    const Run r = run(model, c.batch, Precision::kF32, params, x, dy);
    CHECK(rel_l2(r.y, ref) < 1e-5);
    // dL/dp and dL/dx for L = sum(y * dy), by central differences of the reference.
    const double eps = 1e-6;
    std::vector<double> dp(pd.size()), dx(xd.size());
    for (std::size_t k = 0; k < pd.size(); ++k) {
        auto up = pd, down = pd;
        up[k] += eps;
        down[k] -= eps;
        dp[k] = (dot(reference(c, model, xd, up), dy) - dot(reference(c, model, xd, down), dy)) / (2 * eps);
    }
    for (std::size_t k = 0; k < xd.size(); ++k) {
        auto up = xd, down = xd;
        up[k] += eps;
        down[k] -= eps;
        dx[k] = (dot(reference(c, model, up, pd), dy) - dot(reference(c, model, down, pd), dy)) / (2 * eps);
    }
    for (const auto& t : model.tensors) {
        INFO("tensor " << t.name);
        CHECK(rel_l2(std::vector<float>(r.grads.begin() + t.offset, r.grads.begin() + t.offset + t.size),
                     std::vector<double>(dp.begin() + t.offset, dp.begin() + t.offset + t.size)) < 1e-4);
    }
    CHECK(rel_l2(r.dx, dx) < 1e-4);
}

TEST_CASE("lstm, gru and rnn: finite differences on the engine, and bf16 near f32", "[nn_engine][sequence]") {
    const auto c =
        GENERATE(RnnCase{"lstm", "bidirectional", false, true, 0, 3}, RnnCase{"gru", "forward", true, false, 1, 3},
                 RnnCase{"gru0", "reverse", false, true, 0, 1}, RnnCase{"lstm", "forward", false, false, 2, 1},
                 RnnCase{"rnn", "bidirectional", true, true, 0, 3});
    CAPTURE(c.kind, c.direction, c.batch_first, c.states, c.output, c.batch);
    const auto model = rnn_model(c);
    check_gradients(model, c.batch, 51);
    check_bf16_against_f32(model, c.batch, 52);
}

TEST_CASE("lstm and gru: ONNX's layout computes what PyTorch's does with the gates reordered",
          "[nn_engine][sequence]") {
    const auto c =
        GENERATE(RnnCase{"lstm", "bidirectional", false, false, 0, 3}, RnnCase{"gru", "forward", true, true, 0, 3},
                 RnnCase{"gru0", "reverse", false, false, 1, 3});
    const bool bias = GENERATE(true, false);
    CAPTURE(c.kind, c.direction, bias);
    const bool lstm = std::string(c.kind) == "lstm";
    const int dirs = std::string(c.direction) == "bidirectional" ? 2 : 1;
    const auto pt = rnn_model(c, "pytorch", bias), ox = rnn_model(c, "onnx", bias);
    REQUIRE(pt.parameter_count == ox.parameter_count);
    const auto p = random_vector(static_cast<std::size_t>(pt.parameter_count), 61);
    // PyTorch's parameters into W [dirs, G*H, I], R [dirs, G*H, H], B [dirs, 2*G*H] in ONNX's order.
    const std::vector<int> onnx_from_pytorch = lstm ? std::vector<int>{0, 3, 1, 2} : std::vector<int>{1, 0, 2};
    const std::int64_t G = lstm ? 4 : 3;
    std::vector<float> q(p.size());
    const TensorDef *W = ox.tensor("rnn/W"), *R = ox.tensor("rnn/R"), *B = bias ? ox.tensor("rnn/B") : nullptr;
    REQUIRE((W && R));
    // PyTorch's tensors in `from` into ONNX's in `to`.
    auto reorder = [&](const std::vector<float>& from, std::vector<float>& to) {
        auto copy_gates = [&](const std::string& name, std::int64_t to_offset, std::int64_t cols) {
            const TensorDef* t = pt.tensor(name);
            REQUIRE(t != nullptr);
            for (std::int64_t k = 0; k < G; ++k)
                std::copy_n(from.begin() + t->offset + onnx_from_pytorch[static_cast<std::size_t>(k)] * kH * cols,
                            kH * cols, to.begin() + to_offset + k * kH * cols);
        };
        for (int d = 0; d < dirs; ++d) {
            const std::string s = d == 1 ? "_reverse" : "";
            copy_gates("rnn/w_ih" + s, W->offset + d * G * kH * kI, kI);
            copy_gates("rnn/w_hh" + s, R->offset + d * G * kH * kH, kH);
            if (bias) {
                copy_gates("rnn/b_ih" + s, B->offset + d * 2 * G * kH, 1);
                copy_gates("rnn/b_hh" + s, B->offset + d * 2 * G * kH + G * kH, 1);
            }
        }
    };
    reorder(p, q);
    const auto x = random_vector(static_cast<std::size_t>(c.batch * kL * kI), 62);
    const auto dy = random_vector(static_cast<std::size_t>(c.batch * pt.classes), 63);
    const Run a = run(pt, c.batch, Precision::kF32, p, x, dy), b = run(ox, c.batch, Precision::kF32, q, x, dy);
    CHECK(rel_l2(b.y, a.y) < 1e-6);
    CHECK(rel_l2(b.dx, a.dx) < 1e-6);
    // The gradients follow the same reordering.
    std::vector<float> expected(a.grads.size());
    reorder(a.grads, expected);
    CHECK(rel_l2(b.grads, expected) < 1e-6);
}

TEST_CASE("lstm and gru: errors name what is wrong", "[nn_engine][sequence]") {
    auto error = [](const json& layers, const std::vector<std::int64_t>& shape) {
        const json doc{{"input", {{"shape", shape}, {"type", "float"}}},
                       {"layers", layers},
                       {"loss", {{"kind", "mean_squared_error"}}}};
        auto model = parse_model(doc, "m");
        REQUIRE_FALSE(model);
        return model.error().message;
    };
    using Catch::Matchers::Contains;
    CHECK_THAT(error(json::array({{{"kind", "lstm"}, {"hidden", 4}}}), {5, 3}),
               Contains("expects a float sequence [L, N, I] (batch_first false), got float N x 5 x 3"));
    CHECK_THAT(error(json::array({{{"kind", "gru"}, {"hidden", 4}, {"batch_first", true}}}), {5}),
               Contains("expects a float sequence [N, L, I] (batch_first true), got float N x 5"));
    CHECK_THAT(error(json::array({{{"kind", "lstm"}, {"hidden", 0}, {"batch_first", true}}}), {5, 3}),
               Contains("field \"hidden\""));
    CHECK_THAT(error(json::array({{{"kind", "lstm"}, {"hidden", 4}, {"direction", "sideways"}}}), {5, 3}),
               Contains("field \"direction\""));
    CHECK_THAT(error(json::array({{{"kind", "lstm"}, {"hidden", 4}, {"layout", "keras"}}}), {5, 3}),
               Contains("field \"layout\""));
    CHECK_THAT(error(json::array({{{"kind", "rnn"}, {"hidden", 4}, {"activation", "sigmoid"}}}), {5, 3}),
               Contains("field \"activation\""));
    CHECK_THAT(error(json::array({{{"kind", "gru"}, {"hidden", 4}, {"activation", "relu"}}}), {5, 3}),
               Contains("activation"));
    CHECK_THAT(error(json::array({{{"kind", "lstm"}, {"hidden", 4}, {"linear_before_reset", true}}}), {5, 3}),
               Contains("linear_before_reset"));
    CHECK_THAT(
        error(json::array(
                  {{{"kind", "gru"}, {"hidden", 4}, {"batch_first", true}, {"bias", false}, {"bias_init", "zeros"}}}),
              {5, 3}),
        Contains("given but \"bias\" is false"));
    // A state of the wrong shape: [1, N, 3] where H is 4.
    CHECK_THAT(
        error(json::array({{{"kind", "gather"}, {"name", "h"}, {"axis", 1}, {"indices", json::array({0})}},
                           {{"kind", "transpose"}, {"name", "h0"}, {"perm", {1, 0, 2}}},
                           {{"kind", "lstm"}, {"hidden", 4}, {"batch_first", true}, {"inputs", {"input", "h0"}}}}),
              {5, 3}),
        Contains("the initial hidden state must be float 1 x N x 4, got 1 x N x 3"));
    CHECK_THAT(
        error(json::array(
                  {{{"kind", "gru"}, {"hidden", 4}, {"batch_first", true}, {"inputs", {"input", "input", "input"}}}}),
              {5, 3}),
        Contains("input"));
}

}  // namespace psrun::nn::test::ops_rnn_test
