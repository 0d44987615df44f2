// Helpers of the engine tests: descriptions from JSON, random data, error norms, a harness that
// runs a few layers of a model on plain host buffers (through a Network of just those layers),
// and the gradient checks every operator kind gets: central differences in f32, and bf16
// against the f32 gradients.
#pragma once

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/rng.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/network.h"

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

// A description of `layers` on an input of `shape` (the dims after N) and `type`, its output
// the last layer's flattened to [N, K] (a flatten layer appended when needed), loss mean
// squared error: for tests of any kind on any shape.
ModelDescription graph_model(nlohmann::json layers, const std::vector<std::int64_t>& shape, const char* type = "float");

inline std::vector<float> random_vector(std::size_t n, std::uint64_t seed, double scale = 1.0) {
    psrun::Rng rng(seed);
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

// The precisions the engine can run here: f32, and bf16 where the CPU has it natively (a
// warning names `what` as not tested in bf16 otherwise).
std::vector<Precision> test_precisions(const char* what);
// `v` rounded to bf16 and back (round to nearest even) when `precision` is bf16, so that an input
// or a tensor holds exactly what a bf16 network will read; unchanged in f32.
std::vector<float> bf16_exact(std::vector<float> v, Precision precision);
// Tensor `t`'s elements in a flat buffer of the model's tensors (empty for nullptr).
std::vector<float> tensor_slice(const std::vector<float>& all, const TensorDef* t);

// Layers [first, first + count) of `model` as a Network of their own, on plain host buffers:
// the input the first one reads, the output of the last one (plain, row-major), and gradients.
class LayerHarness {
  public:
    LayerHarness(const ModelDescription& model, int first, int count, std::int64_t batch,
                 Precision precision = Precision::kF32, bool hand_kernels = false);
    // Copies `src` (plain) in, runs forward, returns the output as plain f32.
    std::vector<float> forward(const std::vector<float>& src, bool training = true, std::uint64_t seed = 0);
    // Runs backward from `diff_dst` (plain); returns the plain gradient w.r.t. the input (the
    // tensors' gradients are in `grads`).
    std::vector<float> backward(const std::vector<float>& diff_dst);
    Network& network() { return *net_; }
    const ModelDescription& model() const { return model_; }
    // Copies into params (the network reads that storage; never reassign the vectors).
    void set_params(const std::vector<float>& values) {
        REQUIRE(values.size() == params.size());
        std::copy(values.begin(), values.end(), params.begin());
    }
    std::vector<float> params, grads;  // these layers' tensors only

  private:
    ModelDescription model_;
    std::unique_ptr<Network> net_;
};

// The central difference of `objective` in `value` (perturbed and restored): of the steps `step`
// and step / 2 and their Richardson extrapolation, the estimate closest to `analytic`. One step
// alone is at the mercy of the draw: too coarse for curvature (gelu: 6% off on a small
// gradient), too fine for f32 round-off, across a relu kink by chance. A wrong gradient is off
// in all three.
double central_difference(float& value, double analytic, const std::function<double()>& objective, float step = 1e-2f);

// Checks the gradients of L = sum(outputs * R) (R random) of `model` at `batch`: every
// trainable tensor's and the input's (float inputs) against central differences
// (central_difference) at up to `samples` coordinates each, in f32; a coordinate fails when it differs by more than
// `tolerance` relative to max(|analytic|, |numeric|, 1e-2 * the tensor's largest gradient).
// `outliers`: failures allowed per tensor (kinks of relu and max). Inputs are uniform in
// [-1, 1] (or ids below `vocabulary` for int inputs).
void check_gradients(const ModelDescription& model, std::int64_t batch, std::uint64_t seed, int samples = 24,
                     double tolerance = 2e-2, int outliers = 0, int vocabulary = 0);
// The same model in bf16 against f32 on the same bf16-exact input: outputs and every gradient
// within `tolerance` relative L2 (skipped with a warning where the CPU has no bf16).
void check_bf16_against_f32(const ModelDescription& model, std::int64_t batch, std::uint64_t seed,
                            double tolerance = 3e-2, int vocabulary = 0);

}  // namespace psrun::nn::test
