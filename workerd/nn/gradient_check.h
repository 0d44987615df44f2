// The whole-network gradient check behind `psrun model check` (docs/models.md "Checking a
// network"): one batch through the network's forward, loss and backward as training runs them,
// then every trainable tensor's gradient g checked against the loss itself: the loss's central
// difference along g / |g| (the whole network evaluated at theta +- eps g / |g|, the closest of
// three steps) must equal |g|.
// A kernel whose backward is wrong anywhere upstream of a tensor shows in that tensor. With
// bf16 on a CPU that has it, the bf16 gradients are compared with the f32 ones too.
//
// The gradients themselves (f32) are returned, so that a caller can compare them with another
// framework's for the same module and batch (test/onnx/check_gradients.py: PyTorch's).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

// One model input's values for the batch: floats [N, ...] for a float input, ids for an int one.
struct CheckInput {
    std::vector<float> values;
    std::vector<std::int32_t> ids;
};

// One batch as the network reads it: every model input (in model.inputs order), class labels
// (softmax cross-entropy) or float targets [N, T].
struct CheckBatch {
    std::int64_t size = 0;
    std::vector<CheckInput> inputs;
    std::vector<std::int32_t> labels;
    std::vector<float> targets;
};

struct GradientCheckOptions {
    std::uint64_t seed = 1;          // dropout masks (the same in every evaluation)
    bool finite_differences = true;  // the per-tensor directional check (2 forwards per tensor)
    bool compare_bf16 = true;        // where the CPU has bf16
    bool input_gradients = false;    // also dL/d(input) for every float input
};

struct TensorCheck {
    std::string name;
    std::vector<std::int64_t> shape;
    double gradient_norm = 0;  // |g| (L2)
    // The loss's central difference along g / |g| closest to |g| over eps = 1e-2, 1e-3, 1e-4 of
    // max(1, |theta_t|) (NaN when not computed), and |difference - |g|| / max(|g|, 1e-3,
    // 1e-2 x the largest |g| of the network's tensors): what "the gradient is right" means here
    // (a tensor whose gradient is zero but for rounding is not judged by its own tiny norm).
    double finite_difference = 0;
    double relative_error = 0;
    // max |g_bf16 - g_f32| / max |g_f32| (nullopt when bf16 did not run).
    std::optional<double> bf16_error;
};

struct GradientCheck {
    float loss = 0;
    std::vector<TensorCheck> tensors;  // the trainable tensors, in the description's order
    std::vector<float> gradients;      // f32, the description's flat tensor layout
    // With GradientCheckOptions::input_gradients: per model input, dL/d(input) (f32, the
    // input's layout; empty for an int input).
    std::vector<std::vector<float>> input_gradients;
    std::vector<float> outputs;  // the model output of the batch's forward, f32 [N, classes]
    // The same batch's gradients computed in bf16 (as `gradients`; empty when bf16 did not run).
    std::vector<float> bf16_gradients;
    std::string bf16_note;  // why bf16 was not compared, when it was not
};

// Runs the check on `params` (model.parameter_count values). Errors: the network cannot be
// built for this batch (the engine's message), or the batch does not fit the model
// (kInvalidArgument naming what is wrong).
Result<GradientCheck> check_gradients(const ModelDescription& model, std::span<const float> params,
                                      const CheckBatch& batch, const GradientCheckOptions& options);

}  // namespace psrun::nn
