// The pattern-matched hand kernels in the engine (NetworkOptions::hand_kernels): a network
// with them computes the same loss, predictions and gradients as with oneDNN primitives only,
// over several SGD steps, on mnist_deep and on odd shapes that match; shapes that do not match
// fall back silently and train; the kind labels and implementation lines name the kernel.
// The channel blocks of this CPU and cap: 16 (AVX-512F), or 8 (AVX2 + FMA: AVX2 nodes, and the
// suite's capped run on an AVX-512 host). Skipped with a warning on CPUs with neither.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <string>

#include <dnnl.hpp>

#include "test/nn/engine_test_util.h"
#include "workerd/nn/kernels/conv1_pool.h"
#include "workerd/nn/kernels/max_pool.h"
#include "workerd/nn/network.h"
#include "workerd/nn/parameter_init.h"
#include "workerd/nn/zoo.h"

namespace psrun::nn::test::engine_hand_kernels_test {
namespace {

using nlohmann::json;

bool hand_or_warn() {
    if (kernels::FusedConv1Pool::supported(28, 28, 32, 5)) return true;
    WARN("neither AVX-512F nor AVX2 + FMA on this CPU: the hand kernels are not exercised");
    return false;
}

struct Net {
    std::vector<float> params, grads;
    std::unique_ptr<Network> net;
};

Net make_net(const ModelDescription& model, std::int64_t batch, bool hand, Precision precision = Precision::kF32) {
    Net n{std::vector<float>(static_cast<std::size_t>(model.parameter_count)),
          std::vector<float>(static_cast<std::size_t>(model.parameter_count), -7.0f), nullptr};
    initialize_parameters(model, 21, n.params);
    NetworkOptions options{batch, precision, false};
    options.hand_kernels = hand;
    auto created = Network::create(model, options, n.params, n.grads);
    INFO((created ? std::string() : created.error().message));
    REQUIRE(created);
    n.net = std::move(*created);
    const auto x = random_vector(n.net->input().size(), 22);
    std::transform(x.begin(), x.end(), n.net->input().begin(), [](float v) { return std::fabs(v); });
    for (std::size_t i = 0; i < n.net->labels().size(); ++i)
        n.net->labels()[i] = static_cast<std::int32_t>(i % static_cast<std::size_t>(model.classes));
    return n;
}

std::vector<std::string> labels(const Network& net) { return net.kernel_labels(); }

bool any_line_has(const std::vector<std::string>& lines, const std::string& what) {
    return std::any_of(lines.begin(), lines.end(),
                       [&](const std::string& l) { return l.find(what) != std::string::npos; });
}

// `steps` SGD steps (rate `lr`) on both networks from the same parameters and batch; every
// step the same loss and gradients (relative L2), then the same evaluation loss and, unless
// the tolerance is bf16's, predictions.
void check_same_training(Net& hand, Net& plain, int steps, double tolerance, float lr) {
    for (int step = 0; step < steps; ++step) {
        CAPTURE(step);
        const float a = hand.net->train_step(static_cast<std::uint64_t>(step));
        const float b = plain.net->train_step(static_cast<std::uint64_t>(step));
        REQUIRE(std::isfinite(a));
        CHECK(std::fabs(a - b) <= tolerance * std::fabs(b));
        CHECK(std::count(hand.grads.begin(), hand.grads.end(), -7.0f) == 0);
        CHECK(rel_l2(hand.grads, plain.grads) < tolerance);
        for (std::size_t i = 0; i < hand.params.size(); ++i) {
            hand.params[i] -= lr * hand.grads[i];
            plain.params[i] -= lr * plain.grads[i];
        }
        std::fill(hand.grads.begin(), hand.grads.end(), -7.0f);
    }
    const float a = hand.net->forward(false), b = plain.net->forward(false);
    CHECK(std::fabs(a - b) <= tolerance * std::fabs(b));
    if (tolerance > 1e-3) return;  // bf16: a near tie may flip a prediction
    const auto pa = hand.net->predictions(), pb = plain.net->predictions();
    CHECK(std::equal(pa.begin(), pa.end(), pb.begin(), pb.end()));
}

ModelDescription zoo(const char* name) {
    auto model = load_model(name);
    REQUIRE(model);
    return *model;
}

// 1x12x20: conv 5x5 (`first` filters) + relu + pool 2 (the fused first layer), conv 3x3 (`second`)
// + relu + pool 2 on 6x10 (the blocked pool), dense.
json odd_layers(int first, int second) {
    return json::array({
        {{"kind", "conv2d"}, {"filters", first}, {"kernel", 5}, {"padding", "same"}},
        {{"kind", "relu"}},
        {{"kind", "max_pool"}, {"window", 2}},
        {{"kind", "conv2d"}, {"filters", second}, {"kernel", 3}, {"padding", "same"}},
        {{"kind", "relu"}},
        {{"kind", "max_pool"}, {"window", 2}},
        {{"kind", "dense"}, {"units", 7}},
    });
}
const json kOdd = odd_layers(16, 32);
const json kOdd8 = odd_layers(24, 8);  // hand kernels on 8-channel blocks (AVX2 + FMA, no AVX-512)

// The fused first layer (32 filters) straight into a dense layer.
const json kFirstOnly = json::array({
    {{"kind", "conv2d"}, {"filters", 32}, {"kernel", 5}, {"padding", "same"}},
    {{"kind", "relu"}},
    {{"kind", "max_pool"}, {"window", 2}, {"padding", "same"}},
    {{"kind", "dense"}, {"units", 5}},
});

// The one ISA cap (ONEDNN_MAX_CPU_ISA) turns oneDNN's AVX-512 code and the hand kernels' AVX-512
// blocks off together: the suite's "_avx2" run on an AVX-512 host (test/meson.build) then runs
// what an AVX2 node runs, the hand kernels on 8-channel blocks. Uncapped, their 16-channel blocks
// run exactly where the CPU has AVX-512F.
TEST_CASE("hand kernels follow the CPU and oneDNN's ISA cap", "[nn_engine][hand]") {
    const char* cap = std::getenv("ONEDNN_MAX_CPU_ISA");
    // Set and empty is no cap, for oneDNN and common/cpu_isa.h alike.
    const bool capped =
        cap != nullptr && *cap != '\0' && std::string(cap).rfind("AVX512", 0) != 0 && std::string(cap) != "ALL";
    const bool avx2 = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    CHECK(kernels::FusedConv1Pool::supported(28, 28, 32, 5) == avx2);
    CHECK(kernels::BlockedMaxPool::supported(64, 14, 14) == avx2);
    const int block = kernels::FusedConv1Pool::block_for(32);
    if (capped) {
        CHECK(block == (avx2 ? 8 : 0));
        const auto isa = dnnl::get_effective_cpu_isa();
        CHECK(isa != dnnl::cpu_isa::avx512_core);
        CHECK(isa != dnnl::cpu_isa::avx512_core_bf16);
        CHECK_FALSE(engine_bf16_supported());
    } else {
        CHECK(block == (__builtin_cpu_supports("avx512f") ? 16 : avx2 ? 8 : 0));
    }
}

TEST_CASE("hand kernels: mnist_deep and odd shapes equal the primitives, f32", "[nn_engine][hand]") {
    if (!hand_or_warn()) return;
    struct Case {
        const char* name;
        ModelDescription model;
        int batch;
        bool blocked_pool;
        float lr;  // mnist_deep's tutorial init gives a large first loss on these inputs
    };
    const auto c = GENERATE(values<int>({0, 1, 2, 3}));
    const Case cases[] = {{"mnist_deep", zoo("mnist_deep"), 16, true, 1e-3f},
                          {"odd 1x12x20", model_from(kOdd, 1, 12, 20, 7), 5, true, 0.05f},
                          {"odd, 8-channel blocks", model_from(kOdd8, 1, 12, 20, 7), 5, true, 0.05f},
                          {"first only", model_from(kFirstOnly, 1, 12, 20, 5), 3, false, 0.05f}};
    const Case& k = cases[c];
    CAPTURE(k.name);
    const bool odd8 = std::string(k.name) == "odd, 8-channel blocks";
    if (odd8 && kernels::FusedConv1Pool::block_for(24) != 8) return;  // AVX-512: its 16-channel blocks only
    auto hand = make_net(k.model, k.batch, true);
    auto plain = make_net(k.model, k.batch, false);
    const auto l = labels(*hand.net);
    CHECK(l[0] == "conv2d+relu+max_pool [hand]");
    CHECK(any_line_has(hand.net->implementations(), "0 conv2d+relu+max_pool [hand] fwd+bwd: psrun FusedConv1Pool"));
    if (odd8) CHECK(any_line_has(hand.net->implementations(), "psrun FusedConv1Pool avx2+fma"));
    CHECK(any_line_has(hand.net->implementations(), "BlockedMaxPool") == k.blocked_pool);
    if (k.blocked_pool) CHECK(l[1] == "conv2d+relu+max_pool [hand]");
    CHECK_FALSE(any_line_has(labels(*plain.net), "[hand]"));
    check_same_training(hand, plain, 4, 1e-4, k.lr);

    hand.net->set_profiling(true);
    hand.net->train_step(9);
    CHECK(hand.net->layer_times()[0].kind == "conv2d+relu+max_pool [hand]");
    CHECK(hand.net->layer_times()[0].backward_ms > 0);
}

TEST_CASE("hand kernels: set_gradient_buffer redirects both pattern layers' gradients", "[nn_engine][hand]") {
    if (!hand_or_warn()) return;
    auto b = make_net(model_from(kOdd, 1, 12, 20, 7), 3, true);
    b.net->train_step(1);
    const auto first = b.grads;
    std::vector<float> other(b.grads.size(), -7.0f);
    std::fill(b.grads.begin(), b.grads.end(), 0.5f);
    b.net->set_gradient_buffer(other);
    b.net->train_step(1);
    CHECK(other == first);
    CHECK(std::all_of(b.grads.begin(), b.grads.end(), [](float v) { return v == 0.5f; }));
}

TEST_CASE("hand kernels: shapes that do not match use the primitives and train", "[nn_engine][hand]") {
    if (!hand_or_warn()) return;
    struct Case {
        const char* name;
        json layers;
        int channels, height, width;
        const char* kernel;  // the implementation line expected, or "" for none
    };
    const auto conv = [](int filters, int kernel) {
        return json{{"kind", "conv2d"}, {"filters", filters}, {"kernel", kernel}, {"padding", "same"}};
    };
    const auto pool = [](int window) { return json{{"kind", "max_pool"}, {"window", window}, {"padding", "same"}}; };
    const json relu{{"kind", "relu"}};
    const auto c = GENERATE(range(0, 5));
    const Case cases[] = {
        {"3 input channels, 12 filters", json::array({conv(12, 5), relu, pool(2)}), 3, 12, 20, ""},
        {"3x3 pool", json::array({conv(16, 5), relu, pool(3)}), 1, 12, 20, ""},
        {"odd height", json::array({conv(16, 5), relu, pool(2)}), 1, 13, 20, ""},
        {"no relu", json::array({conv(16, 5), pool(2)}), 1, 12, 20, ""},
        // Kernel 3: not the fused first layer, but the blocked pool still applies.
        {"kernel 3, 1 channel", json::array({conv(16, 3), relu, pool(2)}), 1, 12, 20, "BlockedMaxPool"},
    };
    const Case& k = cases[c];
    CAPTURE(k.name);
    const auto model = model_from(k.layers, k.channels, k.height, k.width, 4);
    auto hand = make_net(model, 4, true);
    auto plain = make_net(model, 4, false);
    CHECK_FALSE(any_line_has(hand.net->implementations(), "FusedConv1Pool"));
    CHECK(any_line_has(hand.net->implementations(), "BlockedMaxPool") == (std::string(k.kernel) == "BlockedMaxPool"));
    CHECK(any_line_has(labels(*hand.net), "[hand]") == (std::string(k.kernel) != ""));
    check_same_training(hand, plain, 3, 1e-4, 0.05f);
    // It trains: SGD on one batch lowers its loss.
    const float first = hand.net->train_step(0);
    for (int step = 0; step < 30; ++step) {
        hand.net->train_step(0);
        for (std::size_t i = 0; i < hand.params.size(); ++i) hand.params[i] -= 0.05f * hand.grads[i];
    }
    CHECK(hand.net->forward(true, 0) < 0.8 * first);
}

TEST_CASE("hand kernels: forward-only mnist_deep equals the primitives", "[nn_engine][hand]") {
    if (!hand_or_warn()) return;
    const auto model = zoo("mnist_deep");
    std::vector<float> params(static_cast<std::size_t>(model.parameter_count));
    initialize_parameters(model, 23, params);
    std::vector<float> loss;
    std::vector<std::vector<std::int32_t>> predictions;
    for (const bool hand : {true, false}) {
        NetworkOptions options{10, Precision::kF32, true};
        options.hand_kernels = hand;
        auto net = Network::create(model, options, params, {});
        REQUIRE(net);
        CHECK(any_line_has(labels(**net), "[hand]") == hand);
        const auto x = random_vector((*net)->input().size(), 24);
        std::transform(x.begin(), x.end(), (*net)->input().begin(), [](float v) { return std::fabs(v); });
        std::fill((*net)->labels().begin(), (*net)->labels().end(), 3);
        loss.push_back((*net)->forward(false));
        predictions.emplace_back((*net)->predictions().begin(), (*net)->predictions().end());
    }
    CHECK(std::fabs(loss[0] - loss[1]) <= 1e-4 * std::fabs(loss[1]));
    CHECK(predictions[0] == predictions[1]);
}

TEST_CASE("hand kernels in bf16: the fused first layer only, close to the primitives", "[nn_engine][hand][bf16]") {
    if (!hand_or_warn()) return;
    if (!engine_bf16_supported()) {
        WARN("no native bf16 on this CPU: skipped");
        return;
    }
    const auto model = zoo("mnist_deep");
    auto hand = make_net(model, 16, true, Precision::kBf16);
    auto plain = make_net(model, 16, false, Precision::kBf16);
    const auto l = labels(*hand.net);
    CHECK(l[0] == "conv2d+relu+max_pool [hand]");
    CHECK(l[1] == "conv2d+relu");  // the blocked pool is f32 only
    CHECK_FALSE(any_line_has(hand.net->implementations(), "BlockedMaxPool"));
    // The fused layer computes in f32 where the primitives use bf16: bf16-sized differences
    // (the bound of the bf16 engine against the f32 Model, engine_models_test.cpp).
    check_same_training(hand, plain, 1, 6e-2, 1e-3f);
}

}  // namespace
}  // namespace psrun::nn::test::engine_hand_kernels_test
