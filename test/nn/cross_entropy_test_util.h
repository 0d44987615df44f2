// Shared by the cross-entropy tests (ops_cross_entropy_test.cpp: the kinds against PyTorch, a
// reference loop and central differences; ops_cross_entropy_graph_test.cpp: the loss as the
// model's own and the ONNX import and export): what a loss node is, the graph around it, a
// reference in double and one train_step.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "workerd/nn/model_description.h"

namespace psrun::nn::test {

// What a loss node is: its kind and fields, and its class weights (empty: none).
struct LossSpec {
    explicit LossSpec(std::string k = "softmax_cross_entropy_loss", std::string r = "mean",
                      std::optional<std::int32_t> i = std::nullopt, double e = 0.0, std::vector<float> w = {})
        : kind(std::move(k)), reduction(std::move(r)), ignore(i), smoothing(e), weights(std::move(w)) {}

    std::string kind;
    std::string reduction;
    std::optional<std::int32_t> ignore;
    double smoothing;
    std::vector<float> weights;
    bool weights_trained = false;  // a parameter tensor (else a constant)

    bool nll() const { return kind == "nll_loss"; }
    bool scalar() const { return reduction != "none"; }
};

// The loss node reading "scores" and "y" (and "w").
nlohmann::json loss_layer(const LossSpec& s);

// Inputs "x" float [N, score_dims...] and "labels" int [N, label_dims...]; scores = x (an
// identity, so that "scores" names a layer; layer 0) and y = the labels (an identity, or [N, 1]
// squeezed to [N] where label_dims is empty: an input has a dim after N; layer 1); the loss;
// then a [N, K] output.
nlohmann::json loss_document(const LossSpec& s, const std::vector<std::int64_t>& score_dims,
                             const std::vector<std::int64_t>& label_dims);

// The model parse_model makes of `doc` (REQUIRE: it parses).
ModelDescription parse_ok(const nlohmann::json& doc);

// The reference in double: per-position losses, the reduced loss, and dL/dx for the upstream
// gradient `g` (per position for none; one value for mean and sum).
struct Reference {
    std::vector<double> loss;
    double reduced = 0;
    std::vector<double> dx;
};

Reference reference(const LossSpec& s, const std::vector<float>& x, const std::vector<std::int32_t>& y,
                    std::int64_t rows, std::int64_t classes, std::int64_t inner, const std::vector<double>& g);

// The scalar loss as the model's own ("loss": {"kind": "graph"}): loss_document without its
// [N, 1] tail.
ModelDescription graph_loss_model(const LossSpec& s, const std::vector<std::int64_t>& score_dims,
                                  const std::vector<std::int64_t>& label_dims);

struct Step {
    float loss = 0;
    std::vector<float> dx, grads;
};

// One Network::train_step with dL/dx: the loss it returns, dL/dx and the tensors' gradients.
// `labels` feeds input `label_input` (the model's, when it has one: through labels()).
Step train_step(const ModelDescription& m, const LossSpec& spec, std::int64_t batch, const std::vector<float>& x,
                const std::vector<std::int32_t>& labels, const std::vector<float>& params = {});

// PyTorch's numbers (test/nn/cross_entropy_reference.py).
inline const std::vector<float> kX3x4 = {0.5f, -1.2f, 2.0f, 0.1f, 1.5f, 0.3f, -0.7f, -2.0f, -0.4f, 0.9f, 0.0f, 1.1f};
inline const std::vector<float> kX2x3x4 = {0.2f,  -0.5f, 1.0f, 0.7f,  1.1f, 0.4f,  -0.3f, -1.5f,
                                           -0.8f, 0.6f,  0.9f, 0.05f, 0.0f, 1.3f,  -1.1f, 0.4f,
                                           -0.6f, 0.2f,  0.8f, -0.9f, 1.7f, -0.2f, 0.3f,  0.5f};
inline const std::vector<std::int32_t> kTokenLabels = {0, 2, -100, 1, 1, -100, 0, 2};

}  // namespace psrun::nn::test
