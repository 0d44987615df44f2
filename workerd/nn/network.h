// Trains any ModelDescription on oneDNN: builds one Layer per description layer, in order
// (conv2d/dense followed by relu as one fused layer; with NetworkOptions::hand_kernels,
// conv2d+relu+max_pool 2x2/2 as one layer on a hand-written AVX-512 kernel where the CPU and
// the shapes allow: conv_relu_pool_layer.h, conv_relu_blocked_pool_layer.h), and the softmax cross-entropy loss, for
// one fixed batch size and precision. Every buffer and primitive is created by create(); a
// step allocates nothing. Activations stay in the formats oneDNN picks (format_tag::any),
// with reorders only where a consumer wants another format.
//
// Parameters are read from, and gradients written to, flat float buffers in the description's
// tensor order and plain layouts (parameter_init.h: parameter_offsets()) — exactly what goes on
// the wire. The network owns neither: `params` (and each gradient buffer) must outlive it, or
// the next set_gradient_buffer(). The input is NCHW f32, labels int32 in [0, classes).
// Not thread-safe; oneDNN and the dropout loops run on the OpenMP threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/nn/layer.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/softmax_loss.h"

namespace psrun::nn {

struct NetworkOptions {
    std::int64_t batch_size = 50;
    Precision precision = Precision::kF32;
    bool forward_only = false;  // evaluation: no backward primitives or gradient buffer
    // Hand-written AVX-512 kernels where a pattern of layers matches one and the CPU allows
    // (workerd/nn/kernels/; the layers' kind labels then end in " [hand]"); false: oneDNN
    // primitives only.
    bool hand_kernels = true;
};

// Per built layer (a fused layer covers several description layers from `index`).
struct LayerTime {
    int index = 0;         // the first description layer it covers
    std::string kind;      // "conv2d+relu", "max_pool", ..., "loss"
    double forward_ms = 0;
    double backward_ms = 0;
};

class Network {
public:
    // Errors: kUnsupported for bf16 without CPU support and for a layer oneDNN cannot build
    // ("layer I (KIND "NAME"): input CxHxW, output ..., batch N, f32: oneDNN cannot build it
    // (...)"); kInvalidArgument for buffer sizes or a batch < 1. grads may be empty iff
    // options.forward_only.
    static Result<std::unique_ptr<Network>> create(const ModelDescription& model,
                                                   const NetworkOptions& options,
                                                   std::span<const float> params,
                                                   std::span<float> grads);
    ~Network();
    Network(const Network&) = delete;
    Network& operator=(const Network&) = delete;

    const ModelDescription& model() const { return model_; }
    const NetworkOptions& options() const { return options_; }
    // The batch the next step reads: NCHW f32 images, labels.
    std::span<float> input() { return input_; }
    std::span<std::int32_t> labels() { return labels_; }

    // Forward with dropout masks from `seed`, backward into the gradient buffer (every
    // gradient fully overwritten). Returns the loss. REQUIRES: !options().forward_only.
    // A label outside [0, classes) throws std::out_of_range (naming the example).
    float train_step(std::uint64_t seed);
    // Forward only (dropout iff training). Returns the loss; predictions() are then valid.
    float forward(bool training, std::uint64_t seed = 0);
    // Arg-max class per example after the last forward or train step.
    std::span<const std::int32_t> predictions() const { return loss_->predictions(); }
    // Softmax probabilities {batch, classes} of the last forward or train step into `out`
    // (SoftmaxLoss::probabilities: computed on this call, not by the step).
    void probabilities(std::span<float> out) const { loss_->probabilities(out); }
    // The following steps write into `grads` (same size, else std::invalid_argument; not
    // owned). No primitive rebuilt.
    void set_gradient_buffer(std::span<float> grads);

    // Per-layer wall time (a clock read around each layer); off by default.
    void set_profiling(bool on) { profiling_ = on; }
    const std::vector<LayerTime>& layer_times() const { return times_; }
    void reset_layer_times();

    const std::vector<std::unique_ptr<Layer>>& layers() const { return layers_; }
    // "3 conv2d+relu fwd: brg:avx512_core", ... for logs.
    std::vector<std::string> implementations() const;

private:
    Network(const ModelDescription& model, const NetworkOptions& options);
    Result<void> build(std::span<const float> params, std::span<float> grads);
    void run_forward(bool training);

    ModelDescription model_;
    NetworkOptions options_;
    dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream_{engine_};
    std::vector<float> input_;
    std::vector<std::int32_t> labels_;
    dnnl::memory input_memory_;
    std::vector<std::unique_ptr<Layer>> layers_;
    std::unique_ptr<SoftmaxLoss> loss_;
    bool profiling_ = false;
    std::vector<LayerTime> times_;  // layers_, then the loss
};

}  // namespace psrun::nn
