// Helpers of the engine tests: descriptions from JSON, random data, error norms, and a harness
// that runs one Layer on plain NCHW / NC host buffers.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workerd/nn/layer.h"
#include "workerd/nn/model_description.h"
#include "workerd/rng.h"

namespace psrun::nn::test {

// A description with `layers` on a C x H x W input, ending in a dense layer of `classes` units
// (appended unless the last layer is one).
inline ModelDescription model_from(nlohmann::json layers, int c, int h, int w, int classes = 3,
                                   const char* reduction = "mean") {
    const auto& last = layers.back();
    if (last.value("kind", "") != "dense" || last.value("units", 0) != classes)
        layers.push_back({{"kind", "dense"}, {"units", classes}});
    const nlohmann::json doc{{"input", {{"channels", c}, {"height", h}, {"width", w}}},
                             {"classes", classes},
                             {"layers", layers},
                             {"loss", {{"kind", "softmax_cross_entropy"}, {"reduction", reduction}}}};
    auto model = parse_model(doc, "test");
    INFO((model ? std::string() : model.error().message));
    REQUIRE(model);
    return *model;
}

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    worker::Rng rng(seed);
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>((2.0 * rng.uniform() - 1.0) * scale);
    return v;
}

// ||a - b|| / ||b|| (L2); 0 when both are zero.
inline double rel_l2(const std::vector<float>& a, const std::vector<double>& b) {
    REQUIRE(a.size() == b.size());
    double num = 0, den = 0;
    for (std::size_t i = 0; i < a.size(); ++i) {
        num += (a[i] - b[i]) * (a[i] - b[i]);
        den += b[i] * b[i];
    }
    return den == 0 ? std::sqrt(num) : std::sqrt(num / den);
}

inline double rel_l2(const std::vector<float>& a, const std::vector<float>& b) {
    return rel_l2(a, std::vector<double>(b.begin(), b.end()));
}

// One layer built from model.layers[first .. first+count) on plain host buffers.
class LayerHarness {
public:
    LayerHarness(const ModelDescription& model, int first, int count, std::int64_t batch,
                 Precision precision = Precision::kF32);
    // Copies `src` (plain NCHW or NC f32) in, runs forward, returns dst as plain f32.
    std::vector<float> forward(const std::vector<float>& src, bool training = true);
    // Copies `diff_dst` (plain) in, runs backward, returns the plain gradient w.r.t. src.
    std::vector<float> backward(const std::vector<float>& diff_dst);
    Layer& layer() { return *layer_; }
    // Copies into params (the layer reads that storage; never reassign the vectors).
    void set_params(const std::vector<float>& values) {
        REQUIRE(values.size() == params.size());
        std::copy(values.begin(), values.end(), params.begin());
    }
    std::vector<float> params, grads;  // this layer's tensors only (offset 0)

private:
    dnnl::engine eng_{dnnl::engine::kind::cpu, 0};
    dnnl::stream strm_{eng_};
    std::vector<float> src_host_, diff_src_host_;
    dnnl::memory src_, diff_src_;
    std::unique_ptr<Layer> layer_;
};

}  // namespace psrun::nn::test
