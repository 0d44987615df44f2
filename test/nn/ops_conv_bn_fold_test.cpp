// conv2d + batch_norm (+ relu / clip) folded into one convolution where the network does not
// train (workerd/nn/ops/conv_bn_kernel.cpp): a forward-only network must compute what a
// training network's evaluation forward computes with the two (three) kernels apart, for
// grouped and depthwise convs, with and without the conv's bias and the batch norm's scale and
// shift, in f32 and bf16; and it must see parameters changed after it was built.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>

#include "test/nn/engine_test_util.h"

namespace psrun::nn::test {
namespace {

using nlohmann::json;

struct FoldCase {
    int groups;
    bool conv_bias, scale, center;
    const char* after;  // "relu", "clip" or "" (the batch norm's output goes to a dense layer)
};

std::vector<double> as_double(std::span<const float> v) { return {v.begin(), v.end()}; }

}  // namespace

TEST_CASE("conv2d + batch_norm folded at inference equals the unfused evaluation forward",
          "[nn_engine][norm][batch_norm][fold]") {
    const auto fc = GENERATE(values<FoldCase>({{1, true, true, true, "relu"},
                                               {1, false, true, true, ""},
                                               {4, false, true, true, "clip"},
                                               {1, true, false, false, "relu"},
                                               {2, true, false, true, ""}}));
    std::vector<Precision> precisions{Precision::kF32};
    if (engine_bf16_supported()) precisions.push_back(Precision::kBf16);
    const auto precision = GENERATE_COPY(from_range(precisions));
    CAPTURE(fc.groups, fc.conv_bias, fc.scale, fc.center, fc.after, to_string(precision));
    json layers = json::array(
        {{{"kind", "conv2d"},
          {"name", "c"},
          {"filters", 8},
          {"kernel", 3},
          {"stride", 2},
          {"padding", {1, 1, 1, 1}},
          {"groups", fc.groups},
          {"bias", fc.conv_bias}},
         {{"kind", "batch_norm"}, {"name", "bn"}, {"epsilon", 1e-3}, {"scale", fc.scale}, {"center", fc.center}}});
    if (std::string(fc.after) == "relu") layers.push_back({{"kind", "relu"}});
    if (std::string(fc.after) == "clip") layers.push_back({{"kind", "clip"}, {"min", 0.0}, {"max", 0.5}});
    const auto model = model_from(layers, 4, 9, 9);
    std::vector<float> params = random_vector(static_cast<std::size_t>(model.parameter_count), 31, 0.5);
    const TensorDef* var = model.tensor("bn/var");
    for (std::int64_t i = 0; i < var->size; ++i) {
        auto& v = params[static_cast<std::size_t>(var->offset + i)];
        v = 0.2f + std::fabs(v);
    }
    const std::int64_t n = 3;
    const auto x = random_vector(static_cast<std::size_t>(n * 4 * 9 * 9), 32, 2.0);
    std::vector<float> grads(params.size());
    auto train = Network::create(model, NetworkOptions{n, precision, false, false, true}, params, grads);
    REQUIRE(train);
    std::vector<float> none;
    auto infer = Network::create(model, NetworkOptions{n, precision, true, false, false}, params, none);
    REQUIRE(infer);
    const auto labels = (*infer)->kernel_labels();
    const std::string want = std::string("conv2d+batch_norm") + (*fc.after ? std::string("+") + fc.after : "");
    CHECK(std::find(labels.begin(), labels.end(), want) != labels.end());
    const auto unfused = (*train)->kernel_labels();
    // The training network keeps the batch norm apart (its training forward needs the batch's
    // statistics); a following relu joins it (fuse_norm_relu).
    CHECK(std::find(unfused.begin(), unfused.end(), *fc.after == 'r' ? "batch_norm+relu" : "batch_norm") !=
          unfused.end());

    const double tol = precision == Precision::kBf16 ? 2e-2 : 1e-5;
    for (int round = 0; round < 2; ++round) {
        std::copy(x.begin(), x.end(), (*train)->input().begin());
        std::copy(x.begin(), x.end(), (*infer)->input().begin());
        (*train)->forward(false);
        (*infer)->forward(false);
        const auto want_out = as_double((*train)->outputs());
        CHECK(rel_l2({(*infer)->outputs().begin(), (*infer)->outputs().end()}, want_out) < tol);
        // New parameters in the same buffer (as the chief's evaluation network sees them after
        // steps): the fold reads them at the next forward.
        const auto moved = random_vector(params.size(), 33, 0.5);
        for (std::size_t i = 0; i < params.size(); ++i) params[i] += 0.5f * moved[i];
        for (std::int64_t i = 0; i < var->size; ++i) {
            auto& v = params[static_cast<std::size_t>(var->offset + i)];
            v = 0.2f + std::fabs(v);
        }
    }
}

}  // namespace psrun::nn::test
