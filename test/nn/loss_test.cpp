// The built-in loss (workerd/nn/loss.h) with label smoothing: softmax cross-entropy against
// torch.nn.functional.cross_entropy(label_smoothing=E) and against the definition by hand, the
// smoothing threaded through NetworkOptions (finite differences of a network's loss), and the
// refusals (another loss kind, E outside [0, 1)).
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "workerd/nn/loss.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"

namespace psrun::nn {
namespace {

using dnnl::memory;

constexpr std::int64_t kBatch = 3, kClasses = 4;
const std::vector<float> kLogits = {2.0f, -1.0f, 0.5f, 0.0f, -0.3f, 0.8f, 1.7f, -2.2f, 0.1f, 0.1f, 0.1f, 0.1f};
const std::vector<std::int32_t> kLabels = {0, 3, 2};

struct LossRun {
    float loss = 0;
    std::vector<float> grad;
};

LossRun run_loss(LossKind kind, LossReduction reduction, double smoothing) {
    dnnl::engine engine(dnnl::engine::kind::cpu, 0);
    dnnl::stream stream(engine);
    const memory::desc desc({kBatch, kClasses}, memory::data_type::f32, memory::format_tag::ab);
    memory out(desc, engine), diff(desc, engine);
    Loss loss(engine, stream, out, diff, kind, reduction, smoothing);
    std::copy(kLogits.begin(), kLogits.end(), static_cast<float*>(out.get_data_handle()));
    if (kind == LossKind::kSoftmaxCrossEntropy) std::copy(kLabels.begin(), kLabels.end(), loss.labels().begin());
    LossRun r;
    r.loss = loss.forward(true);
    const float* g = static_cast<const float*>(diff.get_data_handle());
    r.grad.assign(g, g + kBatch * kClasses);
    return r;
}

// -sum_k q_k log p_k and p - q per example, q = (1 - E) one-hot + E / K, averaged or summed.
LossRun by_hand(LossReduction reduction, double e) {
    LossRun r;
    double total = 0;
    const double divisor = reduction == LossReduction::kMean ? double(kBatch) : 1.0;
    for (std::int64_t b = 0; b < kBatch; ++b) {
        const float* x = kLogits.data() + b * kClasses;
        double sum = 0;
        for (std::int64_t k = 0; k < kClasses; ++k) sum += std::exp(double(x[k]));
        for (std::int64_t k = 0; k < kClasses; ++k) {
            const double q = (k == kLabels[static_cast<std::size_t>(b)] ? 1.0 - e : 0.0) + e / double(kClasses);
            const double p = std::exp(double(x[k])) / sum;
            total -= q * std::log(p);
            r.grad.push_back(static_cast<float>((p - q) / divisor));
        }
    }
    r.loss = static_cast<float>(total / divisor);
    return r;
}

TEST_CASE("softmax cross-entropy with label smoothing matches torch and the definition", "[nn][loss]") {
    // /usr/bin/python3, torch 1.13, float64: torch.nn.functional.cross_entropy(x, y,
    // label_smoothing=E, reduction=R) and x.grad after backward(), on kLogits and kLabels.
    struct Case {
        double e;
        LossReduction reduction;
        double loss;
        std::vector<double> grad;  // the first example's row
    };
    const Case cases[] = {
        {0.0,
         LossReduction::kMean,
         2.024901669141346,
         {-0.0966333590379419, 0.01178459780291629, 0.05281490317165991, 0.032033858063365735}},
        {0.1,
         LossReduction::kMean,
         2.0057350024746796,
         {-0.07163335903794185, 0.00345126446958296, 0.044481569838326594, 0.023700524730032414}},
        {0.1,
         LossReduction::kSum,
         6.017205007424039,
         {-0.21490007711382575, 0.010353793408748868, 0.13344470951497975, 0.07110157419009722}},
        {0.25,
         LossReduction::kMean,
         1.9769850024746793,
         {-0.034133359037941936, -0.009048735530417046, 0.03198156983832657, 0.011200524730032397}},
    };
    for (const auto& c : cases) {
        CAPTURE(c.e, to_string(c.reduction));
        const LossRun got = run_loss(LossKind::kSoftmaxCrossEntropy, c.reduction, c.e);
        CHECK(got.loss == Approx(c.loss).epsilon(1e-6));
        for (std::size_t k = 0; k < 4; ++k) CHECK(got.grad[k] == Approx(c.grad[k]).margin(1e-7));
        const LossRun want = by_hand(c.reduction, c.e);
        CHECK(got.loss == Approx(want.loss).epsilon(1e-6));
        for (std::size_t i = 0; i < want.grad.size(); ++i) CHECK(got.grad[i] == Approx(want.grad[i]).margin(1e-7));
    }
    // Example 3 has equal logits: p = 1/4 everywhere, so its gradient is 1/4 - q exactly.
    const LossRun smooth = run_loss(LossKind::kSoftmaxCrossEntropy, LossReduction::kSum, 0.1);
    CHECK(smooth.grad[8] == Approx(0.25 - 0.025).margin(1e-7));
    CHECK(smooth.grad[10] == Approx(0.25 - 0.925).margin(1e-7));
}

TEST_CASE("label smoothing is refused for the other losses and outside [0, 1)", "[nn][loss]") {
    CHECK_THROWS_AS(run_loss(LossKind::kMeanSquaredError, LossReduction::kMean, 0.1), std::invalid_argument);
    CHECK_THROWS_AS(run_loss(LossKind::kSigmoidCrossEntropy, LossReduction::kMean, 0.1), std::invalid_argument);
    CHECK_THROWS_AS(run_loss(LossKind::kSoftmaxCrossEntropy, LossReduction::kMean, 1.0), std::invalid_argument);
    CHECK_THROWS_AS(run_loss(LossKind::kSoftmaxCrossEntropy, LossReduction::kMean, -0.1), std::invalid_argument);
    CHECK_NOTHROW(run_loss(LossKind::kMeanSquaredError, LossReduction::kMean, 0.0));
}

ModelDescription dense_model(const char* loss) {
    nlohmann::json doc{
        {"input", {{"shape", {5}}}}, {"layers", {{{"kind", "dense"}, {"units", 3}}}}, {"loss", {{"kind", loss}}}};
    doc[std::string(loss) == "softmax_cross_entropy" ? "classes" : "targets"] = 3;
    auto model = parse_model(doc, "test");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

TEST_CASE("NetworkOptions::label_smoothing reaches the loss: its gradient is the smoothed loss's", "[nn][loss]") {
    const ModelDescription model = dense_model("softmax_cross_entropy");
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count)), grads(params.size());
    initialize_parameters(model, 3, params);
    NetworkOptions options;
    options.batch_size = 4;
    options.label_smoothing = 0.2f;
    auto created = Network::create(model, options, params, grads);
    INFO((created ? std::string() : created.error().message));
    REQUIRE(created);
    Network& net = **created;
    for (std::size_t i = 0; i < net.input().size(); ++i) net.input()[i] = std::sin(0.7f * float(i) + 0.3f);
    const std::int32_t labels[] = {0, 2, 1, 2};
    std::copy(std::begin(labels), std::end(labels), net.labels().begin());
    const float loss = net.train_step(1);
    // Smoothing changes the loss: the same weights without it give another value.
    NetworkOptions plain = options;
    plain.label_smoothing = 0.0f;
    std::vector<float> other_grads(grads.size());
    auto unsmoothed = Network::create(model, plain, params, other_grads);
    REQUIRE(unsmoothed);
    std::copy(net.input().begin(), net.input().end(), (*unsmoothed)->input().begin());
    std::copy(std::begin(labels), std::end(labels), (*unsmoothed)->labels().begin());
    CHECK(std::fabs((*unsmoothed)->train_step(1) - loss) > 1e-3);
    // Central differences of the smoothed loss against the analytic gradient.
    const float eps = 1e-3f;
    double err = 0, norm = 0;
    for (std::size_t i = 0; i < params.size(); ++i) {
        const float saved = params[i];
        params[i] = saved + eps;
        const double up = net.forward(true, 1);
        params[i] = saved - eps;
        const double down = net.forward(true, 1);
        params[i] = saved;
        const double fd = (up - down) / (2.0 * eps);
        err += (grads[i] - fd) * (grads[i] - fd);
        norm += fd * fd;
    }
    CHECK(norm > 1e-4);
    CHECK(std::sqrt(err / norm) < 1e-3);
}

TEST_CASE("Network::create refuses label smoothing with another loss", "[nn][loss]") {
    const ModelDescription model = dense_model("mean_squared_error");
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count)), grads(params.size());
    NetworkOptions options;
    options.batch_size = 2;
    options.label_smoothing = 0.1f;
    auto refused = Network::create(model, options, params, grads);
    REQUIRE_FALSE(refused);
    CHECK(refused.error().code == ErrorCode::kInvalidArgument);
    CHECK_THAT(refused.error().message, Catch::Contains("label smoothing"));
    options.label_smoothing = 0.0f;
    CHECK(Network::create(model, options, params, grads));
}

}  // namespace
}  // namespace psrun::nn
