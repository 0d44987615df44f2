// TF's mnist_deep CNN on oneDNN 2.6 primitives, for one fixed batch size:
//   conv KxK C1 SAME + bias + ReLU -> max-pool 2x2/2 -> conv KxK C2 SAME + bias + ReLU ->
//   max-pool 2x2/2 -> fc (flattened NHWC) F + ReLU -> dropout (keep 0.5, training only) ->
//   fc Z -> softmax cross-entropy (mean over the batch).
// Every buffer and primitive is created by the constructor; a step allocates nothing.
// Activations use the formats oneDNN picks (format_tag::any); parameters are read from, and
// gradients written to, the plain layouts of ParameterSet (reorders only where they differ).
// Where oneDNN 2.6 cannot fuse, hand-written AVX-512 kernels replace primitives when the CPU
// allows (ModelConfig::hand_kernels): conv1 + ReLU + pool1, and pool2.
// Not thread-safe; oneDNN runs each primitive on the OpenMP threads (omp_set_num_threads).
#pragma once

#include <array>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/parameter_set.h"

namespace psrun::worker {

enum class Precision { kF32, kBf16 };  // bf16: bf16 activations/weights, f32 master weights

[[nodiscard]] Result<Precision> parse_precision(const std::string& name);
// True when oneDNN can run bf16 primitives natively on this CPU.
bool bf16_supported();

struct ModelConfig {
    ModelShape shape;
    int batch_size = 50;
    Precision precision = Precision::kF32;
    float keep_prob = 0.5f;  // dropout keep probability in training
    // fc1 weights (and their gradient) in the blocked layout oneDNN prefers, reordered from/to the
    // plain ParameterSet each step (~2 x 13 MB of traffic), instead of used in place. Default: on
    // for bf16 (brgemm kernels, 3x faster than gemm for the weight gradient), off for f32.
    int fc1_blocked_weights = -1;  // -1: by precision, 0: plain, 1: blocked
    bool forward_only = false;      // evaluation model: no backward primitives or buffers
    // Hand-written AVX-512 kernels where oneDNN 2.6 lacks the fusion, when the CPU and the
    // formats allow: conv1 + ReLU + pool1 as one f32 layer (workerd/nn/kernels/conv1_pool.h; also in bf16
    // mode, converted for conv2) and, in f32, pool2 with conv2's ReLU backward
    // (workerd/nn/kernels/max_pool.h). false: oneDNN primitives only.
    bool hand_kernels = true;
    bool fc1_blocked() const {
        return fc1_blocked_weights < 0 ? precision == Precision::kBf16 : fc1_blocked_weights != 0;
    }
};

// Layers for the per-layer time split; kUpdate is the optimizer (timed by the trainer).
enum class Layer : int { kInput, kConv1, kPool1, kConv2, kPool2, kFc1, kDropout, kFc2, kLoss, kCount };
const char* layer_name(Layer layer);

struct LayerTime {
    double forward_ms = 0;
    double backward_ms = 0;
};

class Model {
public:
    // `params` and `grads` must outlive the model and keep their buffers (they are read and
    // written in place). grads are fully overwritten by every train_step().
    Model(const ModelConfig& config, const ParameterSet& params, ParameterSet& grads);
    ~Model();
    Model(const Model&) = delete;
    Model& operator=(const Model&) = delete;

    const ModelConfig& config() const;
    // The batch the next step reads: images NCHW (C = 1) as floats in [0, 1], labels 0..Z-1.
    std::span<float> input();
    std::span<std::int32_t> labels();

    // Forward with dropout (mask drawn from dropout_seed), backward into grads. Returns the loss.
    // REQUIRES: !config().forward_only.
    float train_step(std::uint64_t dropout_seed);
    // Forward only (dropout iff training). Returns the loss; predictions() are then valid.
    float forward(bool training, std::uint64_t dropout_seed = 0);
    // Makes the following train steps write their gradients into `grads` (same shape as the
    // constructor's, must outlive the model or the next call) instead. Cheap: no primitive is
    // rebuilt. The overlapping worker alternates two buffers so that one can be in flight.
    void set_gradient_buffer(ParameterSet& grads);
    // Arg-max class of each example after the last forward pass or train step.
    std::span<const std::int32_t> predictions() const;

    // Per-layer timing (adds a clock read around every primitive); off by default.
    void set_profiling(bool on);
    const std::array<LayerTime, static_cast<int>(Layer::kCount)>& layer_times() const;
    void reset_layer_times();

    // Plain copy (NCHW or NC, f32) of a layer's output after the last pass; for tests.
    // kFc1 is after ReLU and dropout; kFc2 is the logits. kConv1's output does not exist when
    // the first layer is fused: throws std::logic_error.
    std::vector<float> activation(Layer layer) const;
    // The oneDNN implementation names chosen for the layers ("conv1: brg:avx512_core", ...).
    std::vector<std::string> implementations() const;
    // True when conv1 + ReLU + pool1 run fused (see ModelConfig::hand_kernels).
    bool first_layer_fused() const;

private:
    struct Impl;
    std::unique_ptr<Impl> impl_;
};

}  // namespace psrun::worker
