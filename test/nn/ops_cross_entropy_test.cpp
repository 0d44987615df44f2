// softmax_cross_entropy_loss and nll_loss (workerd/nn/ops/cross_entropy.cpp): the losses and the
// scores' gradients against PyTorch's numbers (test/nn/cross_entropy_reference.py, embedded in
// cross_entropy_test_util.h), against a reference loop in double and central differences over
// every combination of reduction, per-token shapes, class weights (a constant, or a trained
// tensor whose gradient must be zero), ignore_index and label smoothing; bf16 against f32;
// out-of-range labels (the JSON form and its errors: ops_cross_entropy_json_test.cpp). The graphs here end in a [N, K]
// output read through Network::backward_from (any upstream gradient): reduction none as it is (or unsqueezed to [N,
// 1]), mean and sum expanded from the scalar to [N, 1] (the scalar's gradient is then the sum of the upstream
// gradient). The loss as the model's own and ONNX: ops_cross_entropy_graph_test.cpp.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "common/rng.h"
#include "test/nn/cross_entropy_test_util.h"
#include "test/nn/ops_test_util.h"

namespace psrun::nn::test::ops_cross_entropy_test {
namespace {

using nlohmann::json;

struct Run {
    std::vector<float> out, dx, grads;
};

// One forward (training) and backward_from(r): the output, dL/dx and the tensors' gradients
// (initialised to -7: every one must be written). The trained class weights hold `spec.weights`.
Run run(const ModelDescription& m, const LossSpec& spec, std::int64_t batch, const std::vector<float>& x,
        const std::vector<std::int32_t>& labels, const std::vector<float>& r, Precision precision = Precision::kF32) {
    std::vector<float> params(static_cast<std::size_t>(m.parameter_count));
    initialize_parameters(m, 3, params);
    if (spec.weights_trained) {
        const TensorDef* t = m.tensor("w/value");
        REQUIRE(t != nullptr);
        std::copy(spec.weights.begin(), spec.weights.end(), params.begin() + t->offset);
    }
    Run out;
    out.grads.assign(params.size(), -7.0f);
    NetworkOptions o{batch, precision, false, false, true};
    auto net = Network::create(m, o, params, out.grads);
    INFO((net ? std::string() : net.error().message));
    REQUIRE(net);
    REQUIRE((*net)->input(0).size() == x.size());
    REQUIRE((*net)->input_ids(1).size() == labels.size());
    std::copy(x.begin(), x.end(), (*net)->input(0).begin());
    std::copy(labels.begin(), labels.end(), (*net)->input_ids(1).begin());
    (*net)->forward(true);
    out.out.assign((*net)->outputs().begin(), (*net)->outputs().end());
    REQUIRE(out.out.size() == r.size());
    (*net)->backward_from(r);
    out.dx.assign((*net)->input_gradient(0).begin(), (*net)->input_gradient(0).end());
    return out;
}

// The upstream gradients `r` of the [N, K] output as the loss node sees them: per position
// (none), or their sum (a scalar expanded to [N, 1]).
std::vector<double> upstream(const LossSpec& s, const std::vector<float>& r) {
    if (!s.scalar()) return {r.begin(), r.end()};
    double sum = 0;
    for (const float v : r) sum += v;
    return {sum};
}

// sum(out * r) through forward(true), for central differences in x.
void check_finite_differences(const ModelDescription& m, std::int64_t batch, const std::vector<float>& x,
                              const std::vector<std::int32_t>& labels, const std::vector<float>& r,
                              const std::vector<float>& dx, const LossSpec& spec) {
    std::vector<float> params(static_cast<std::size_t>(m.parameter_count)), grads(params.size());
    initialize_parameters(m, 3, params);
    if (spec.weights_trained) {
        const TensorDef* t = m.tensor("w/value");
        std::copy(spec.weights.begin(), spec.weights.end(), params.begin() + t->offset);
    }
    auto net = Network::create(m, NetworkOptions{batch, Precision::kF32, false, false, false}, params, grads);
    REQUIRE(net);
    std::copy(labels.begin(), labels.end(), (*net)->input_ids(1).begin());
    auto input = (*net)->input(0);
    std::copy(x.begin(), x.end(), input.begin());
    const auto objective = [&] {
        (*net)->forward(true);
        double l = 0;
        const auto out = (*net)->outputs();
        for (std::size_t i = 0; i < out.size(); ++i) l += static_cast<double>(out[i]) * r[i];
        return l;
    };
    double scale = 0;
    for (const float v : dx) scale = std::max(scale, static_cast<double>(std::fabs(v)));
    psrun::Rng rng(11);
    const float eps = 1e-2f;
    for (int k = 0; k < 16; ++k) {
        const auto c = static_cast<std::size_t>(rng.below(x.size()));
        input[c] = x[c] + eps;
        const double up = objective();
        input[c] = x[c] - eps;
        const double down = objective();
        input[c] = x[c];
        const double numeric = (up - down) / (2.0 * static_cast<double>(eps)), analytic = dx[c];
        INFO("x[" << c << "]: analytic " << analytic << ", numeric " << numeric);
        CHECK(std::fabs(analytic - numeric) <=
              2e-2 * std::max({std::fabs(analytic), std::fabs(numeric), 1e-2 * scale, 1e-6}));
    }
}

struct TorchCase {
    const char* name;
    LossSpec spec;
    bool token;  // x [2, 3, 4] (else [3, 4])
    std::vector<std::int32_t> labels;
    std::vector<float> r;  // none: the upstream gradient (else: 1 at the first row)
    std::vector<double> loss, grad;
};

TEST_CASE("cross-entropy losses and gradients equal PyTorch's", "[cross_entropy]") {
    LossSpec smoothed{"softmax_cross_entropy_loss", "mean", -100, 0.2, {0.3f, 1.5f, 0.8f}};
    LossSpec smoothed_none = smoothed;
    smoothed_none.reduction = "none";
    const std::vector<TorchCase> cases = {
        {"plain_mean",
         LossSpec{},
         false,
         {2, 0, 3},
         {},
         {0.525697317},
         {0.0526202853, 0.00961285869, -0.097505576, 0.0352724321, -0.102204125, 0.0696147807, 0.0256098466,
          0.00697949733, 0.0313200477, 0.114922545, 0.046724021, -0.192966614}},
        {"plain_sum",
         LossSpec{"softmax_cross_entropy_loss", "sum"},
         false,
         {2, 0, 3},
         {},
         {1.57709195},
         {0.157860856, 0.0288385761, -0.292516728, 0.105817296, -0.306612374, 0.208844342, 0.0768295399, 0.020938492,
          0.0939601432, 0.344767634, 0.140172063, -0.578899841}},
        {"plain_none",
         LossSpec{"softmax_cross_entropy_loss", "none"},
         false,
         {2, 0, 3},
         {0.5f, -1.0f, 2.0f},
         {0.346041294, 0.366166091, 0.864884565},
         {0.0789304279, 0.014419288, -0.146258364, 0.0529086481, 0.306612374, -0.208844342, -0.0768295399, -0.020938492,
          0.187920286, 0.689535268, 0.280344126, -1.15779968}},
        {"token_weighted_smoothed_mean",
         smoothed,
         true,
         kTokenLabels,
         {},
         {1.85308785},
         {-0.0292325182,
          0.0203518413,
          0,
          0.15789726,
          0.0318489985,
          0.0402866958,
          0,
          -0.232078316,
          -0.00261648028,
          -0.0606385371,
          0,
          0.0741810568,
          0.033760512,
          0,
          -0.0432300042,
          0.0619359375,
          -0.229361022,
          0,
          0.0260327204,
          -0.0013030574,
          0.19560051,
          0,
          0.0171972838,
          -0.0606328801}},
        {"token_weighted_smoothed_none",
         smoothed_none,
         true,
         kTokenLabels,
         {1.0f, -0.5f, 3.0f, 0.25f, 2.0f, 1.0f, -1.5f, 0.75f},
         {0.518112366, 0.665186255, 0, 3.56804811, 3.36617454, 0, 0.753412647, 0.76512296},
         {-0.152009096,
          -0.0529147879,
          0,
          0.205266439,
          0.165614794,
          -0.10474541,
          0,
          -0.301701814,
          -0.0136056976,
          0.157660198,
          0,
          0.0964353747,
          0.351109328,
          0,
          0.337194036,
          0.241550158,
          -2.38535465,
          0,
          -0.203055221,
          -0.00508192389,
          2.03424533,
          0,
          -0.134138815,
          -0.236468235}},
        {"nll_weighted_ignored_mean",
         LossSpec{"nll_loss", "mean", 0, 0.0, {1.0f, 2.0f, 0.5f, 1.5f}},
         false,
         {2, 0, 1},
         {},
         {-1.11999998},
         {0, 0, -0.2, 0, 0, 0, 0, 0, 0, -0.8, 0, 0}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.name);
        const std::int64_t batch = c.token ? 2 : 3;
        const auto doc = c.token ? loss_document(c.spec, {3, 4}, {4}) : loss_document(c.spec, {4}, {});
        const auto m = parse_ok(doc);
        std::vector<float> r = c.r;
        if (r.empty()) {  // the scalar expanded to [N, 1]: its gradient is 1
            r.assign(static_cast<std::size_t>(batch), 0.0f);
            r[0] = 1.0f;
        }
        const auto got = run(m, c.spec, batch, c.token ? kX2x3x4 : kX3x4, c.labels, r);
        if (c.spec.scalar()) {
            for (const float v : got.out) CHECK(v == Approx(c.loss[0]).epsilon(1e-6));
        } else {
            check_close(got.out, c.loss, 1e-6);
        }
        check_close(got.dx, c.grad, 1e-6);
        // The reference loop agrees with torch too (so the generated cases below test the same formula).
        const auto ref = reference(c.spec, c.token ? kX2x3x4 : kX3x4, c.labels, batch, c.token ? 3 : 4, c.token ? 4 : 1,
                                   upstream(c.spec, r));
        std::vector<float> ref_dx(ref.dx.begin(), ref.dx.end());
        check_close(ref_dx, c.grad, 1e-6);
    }
}

TEST_CASE(
    "cross-entropy losses: every reduction, shape, weighting, ignore_index and smoothing against a reference "
    "loop and central differences",
    "[cross_entropy]") {
    const std::string kind = GENERATE("softmax_cross_entropy_loss", "nll_loss");
    const std::string reduction = GENERATE("mean", "sum", "none");
    const bool token = GENERATE(false, true);     // [N, C] or [N, C, L]
    const int weighting = GENERATE(0, 1, 2);      // none, a constant, a trained tensor
    const bool ignoring = GENERATE(false, true);  // ignore_index 1
    const double smoothing = GENERATE(0.0, 0.15);
    CAPTURE(kind, reduction, token, weighting, ignoring, smoothing);
    if (kind == "nll_loss" && smoothing > 0) return;  // nll_loss has no smoothing
    const std::int64_t batch = 3, classes = 5, length = token ? 4 : 1;
    LossSpec s{kind, reduction};
    if (ignoring) s.ignore = 1;
    s.smoothing = smoothing;
    if (weighting > 0) s.weights = {0.5f, 1.25f, 2.0f, 0.75f, 1.5f};
    s.weights_trained = weighting == 2;
    const auto m =
        token ? parse_ok(loss_document(s, {classes, length}, {length})) : parse_ok(loss_document(s, {classes}, {}));
    const auto x = random_vector(static_cast<std::size_t>(batch * classes * length), 21, 2.0);
    std::vector<std::int32_t> labels;
    psrun::Rng rng(22);
    for (std::int64_t q = 0; q < batch * length; ++q) labels.push_back(static_cast<std::int32_t>(rng.below(classes)));
    labels[0] = 1;  // at least one ignored position where ignoring
    labels[1] = 3;
    const auto r = random_vector(static_cast<std::size_t>(batch * (s.scalar() ? 1 : length)), 23);
    const auto got = run(m, s, batch, x, labels, r);
    const auto ref = reference(s, x, labels, batch, classes, length, upstream(s, r));
    if (s.scalar()) {
        for (const float v : got.out) CHECK(v == Approx(ref.reduced).epsilon(1e-5).margin(1e-6));
    } else {
        check_close(got.out, ref.loss, 1e-5);
    }
    check_close(got.dx, ref.dx, 1e-5);
    if (s.weights_trained) {  // the class weights get no gradient: zeros, written
        const TensorDef* t = m.tensor("w/value");
        for (std::int64_t c = 0; c < t->size; ++c) CHECK(got.grads[static_cast<std::size_t>(t->offset + c)] == 0.0f);
    }
    check_finite_differences(m, batch, x, labels, r, got.dx, s);
}

TEST_CASE("cross-entropy over rows that are a multiple of the batch (a reshape(-1, C))", "[cross_entropy]") {
    // x [N, 2, 4] -> [2N, 4]; labels [N, 2] -> [2N].
    LossSpec s{"softmax_cross_entropy_loss", "mean"};
    json doc = loss_document(s, {2, 4}, {2});
    doc["layers"][0] = {{"kind", "reshape"}, {"name", "scores"}, {"inputs", {"x"}}, {"shape", {"2N", 4}}};
    doc["layers"][1] = {{"kind", "reshape"}, {"name", "y"}, {"inputs", {"labels"}}, {"shape", {"2N"}}};
    const auto m = parse_ok(doc);
    CHECK(m.value("loss").dims.empty());
    const std::int64_t batch = 3;
    const auto x = random_vector(24, 31, 2.0);
    const std::vector<std::int32_t> labels = {0, 3, 2, 2, 1, 0};
    const std::vector<float> r = {0.5f, -0.25f, 1.0f};
    const auto got = run(m, s, batch, x, labels, r);
    const auto ref = reference(s, x, labels, 6, 4, 1, upstream(s, r));
    for (const float v : got.out) CHECK(v == Approx(ref.reduced).epsilon(1e-5));
    check_close(got.dx, ref.dx, 1e-5);
    // A label out of range names the row (not an example: the rows are 2N).
    std::vector<std::int32_t> bad = labels;
    bad[3] = 4;
    CHECK_THROWS_MATCHES(run(m, s, batch, x, bad, r), std::out_of_range,
                         Catch::Message("label 4 of row 3 is outside the classes [0, 4)"));
}

TEST_CASE("a label outside the classes stops the step naming where; ignore_index is never checked", "[cross_entropy]") {
    const std::string kind = GENERATE("softmax_cross_entropy_loss", "nll_loss");
    CAPTURE(kind);
    LossSpec s{kind, "sum"};
    const auto m = parse_ok(loss_document(s, {4}, {}));
    const std::vector<float> r = {1.0f, 0.0f, 0.0f};
    CHECK_THROWS_MATCHES(run(m, s, 3, kX3x4, {0, 4, 1}, r), std::out_of_range,
                         Catch::Message("label 4 of example 1 is outside the classes [0, 4)"));
    CHECK_THROWS_MATCHES(run(m, s, 3, kX3x4, {0, 1, -1}, r), std::out_of_range,
                         Catch::Message("label -1 of example 2 is outside the classes [0, 4)"));
    // Per token: the position too, and the ignore_index the label is not.
    LossSpec t{kind, "none", -100};
    const auto per_token = parse_ok(loss_document(t, {3, 4}, {4}));
    std::vector<std::int32_t> labels = kTokenLabels;
    labels[6] = 3;
    CHECK_THROWS_MATCHES(run(per_token, t, 2, kX2x3x4, labels, std::vector<float>(8, 1.0f)), std::out_of_range,
                         Catch::Message("label 3 of example 1, position 2 is outside the classes [0, 3) and is not "
                                        "ignore_index -100"));
    // -100 is ignored where it is the ignore_index: no error, loss 0 there.
    const auto fine = run(per_token, t, 2, kX2x3x4, kTokenLabels, std::vector<float>(8, 1.0f));
    CHECK(fine.out[2] == 0.0f);
    CHECK(fine.out[5] == 0.0f);
}

TEST_CASE("a mean over positions that are all ignored is 0 with a zero gradient (torch: nan)", "[cross_entropy]") {
    const std::string kind = GENERATE("softmax_cross_entropy_loss", "nll_loss");
    LossSpec s{kind, "mean", 1};
    const auto m = parse_ok(loss_document(s, {4}, {}));
    const auto got = run(m, s, 3, kX3x4, {1, 1, 1}, {1.0f, 0.0f, 0.0f});
    for (const float v : got.out) CHECK(v == 0.0f);
    for (const float v : got.dx) CHECK(v == 0.0f);
}

TEST_CASE("cross-entropy in bf16 against f32", "[cross_entropy][bf16]") {
    // Scores from a dense layer, so that the loss reads bf16 activations.
    const std::string reduction = GENERATE("mean", "none");
    for (const auto precision : test_precisions("cross-entropy")) {
        if (precision == Precision::kF32) continue;
        LossSpec s{"softmax_cross_entropy_loss", reduction, -100, 0.1, {0.5f, 1.25f, 2.0f, 0.75f}};
        json doc = loss_document(s, {6}, {});
        doc["layers"][0] = {{"kind", "dense"}, {"name", "scores"}, {"inputs", {"x"}}, {"units", 4}};
        const auto m = parse_ok(doc);
        const auto x = bf16_exact(random_vector(18, 41), Precision::kBf16);
        const std::vector<std::int32_t> labels = {3, -100, 0};
        const std::vector<float> r = {0.7f, -0.3f, 1.1f};
        const auto a = run(m, s, 3, x, labels, r, Precision::kF32);
        const auto b = run(m, s, 3, x, labels, r, Precision::kBf16);
        CHECK(rel_l2(b.out, a.out) < 3e-2);
        CHECK(rel_l2(b.dx, a.dx) < 3e-2);
        CHECK(rel_l2(b.grads, a.grads) < 3e-2);
    }
}

}  // namespace
}  // namespace psrun::nn::test::ops_cross_entropy_test
