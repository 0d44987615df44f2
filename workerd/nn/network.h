// Trains any ModelDescription on oneDNN: one Kernel per node of the graph (kernel.h), or per
// fused group of nodes (fusion.h: conv2d/dense + relu as a post-op; with
// NetworkOptions::hand_kernels, conv2d + relu + max_pool 2x2/2 on a hand-written AVX-512 or AVX2 kernel
// where the CPU and the shapes allow), in topological order, and the loss, for one fixed batch
// size and precision. Every buffer and primitive is created by create(); a step allocates
// nothing. Activations stay in the formats oneDNN picks, with reorders only where a consumer
// wants another format.
//
// Gradients: a value read by several nodes gets the sum of their gradients (the last reader in
// graph order writes, the others add), and so does a tensor shared by several nodes; only
// values that depend on a trainable tensor and reach the loss get a gradient.
//
// Tensors are read from, and gradients written to, flat float buffers in the description's
// tensor order and shapes (model_description.h) — exactly what goes on the wire. The network
// owns neither: `params` (and each gradient buffer) must outlive it, or the next
// set_gradient_buffer(). Each of the model's inputs (model.inputs, by index) has its own
// buffer: float [N, ...] (images NCHW) or int32 ids; targets: int32 class labels (softmax
// cross-entropy) or float [N, T].
// Not thread-safe; oneDNN and the hand loops run on the OpenMP threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/nn/kernel.h"
#include "workerd/nn/model_description.h"

namespace psrun::nn {

struct NetworkOptions {
    std::int64_t batch_size = 50;
    Precision precision = Precision::kF32;
    bool forward_only = false;  // evaluation: no backward work or gradient buffer
    // Hand-written kernels where a pattern of nodes matches one and the CPU allows
    // (workerd/nn/kernels/: the AVX-512 conv + relu + pool fusions, whose labels end in
    // " [hand]", and a depthwise conv's weight gradient); false: oneDNN primitives for those.
    bool hand_kernels = true;
    // Tests: compute dL/d(input) too (every float input), readable by input_gradient(i), so that a
    // finite-difference check reaches the first layer's data gradient.
    bool input_gradient = false;
    // Softmax cross-entropy only (Loss): E in [0, 1) smooths the targets to (1 - E) one-hot +
    // E / K. create() refuses it for another loss or outside [0, 1).
    float label_smoothing = 0.0f;
    // Training networks: activations, their gradients and the engine's temporaries share one
    // arena by lifetime (buffer_plan.h); false, or the environment variable
    // PSRUN_PLAN_BUFFERS=0: one buffer each. Results are the same bit for bit either way.
    // Forward-only networks are never planned.
    bool plan_buffers = true;
};

// The engine's buffers for one batch (activations, gradients of activations, conversions and
// temporaries; not the parameters, their gradients, the input batch, oneDNN's scratchpads and
// what kernels keep for themselves: dropout masks, batch statistics, workspaces). Bytes.
struct MemoryUse {
    bool planned = false;  // the buffers were planned (else planned_bytes == unplanned_bytes)
    // Planning was asked for but the plan failed to hold (a view outlived its buffer) and the
    // network was built again with one buffer each: right, but larger. An engine defect to report.
    bool plan_failed = false;
    std::size_t planned_bytes = 0;    // the arena plus the buffers kept out of it
    std::size_t unplanned_bytes = 0;  // one buffer each: the sum of all
    std::size_t lower_bound = 0;      // the most bytes live at one step: no plan needs fewer
    // Inputs a backward reads through a conversion kept for it, the value itself not kept
    // (BackwardReads::as_converted).
    std::size_t read_as_converted = 0;
    // Outputs written over an input's buffer (BackwardReads::in_place) and gradients held in
    // another's buffer (share_gradients): the bytes a buffer each would have added.
    std::size_t in_place_bytes = 0;
    std::size_t shared_gradient_bytes = 0;
    // Gradients made in their first writer's format, where a build that tried it needed fewer
    // bytes (BuildLessons::grad_descs).
    std::size_t gradients_in_writer_format = 0;
};

// Per kernel (a fused kernel covers several nodes from `index`), and the loss last.
struct LayerTime {
    int index = 0;     // the first node it covers
    std::string kind;  // "conv2d+relu", "max_pool", ..., "loss"
    std::string name;  // the first node's name ("loss" for the loss)
    double forward_ms = 0;
    double backward_ms = 0;
};

class Loss;
struct NetworkPlan;

class Network {
  public:
    // Errors: kUnsupported for bf16 without CPU support and for a node the engine cannot build
    // ("layer I (KIND "NAME"): input ..., output ..., batch N, f32: oneDNN cannot build it
    // (...)"); kInvalidArgument for buffer sizes, a batch < 1 or a label smoothing the loss cannot
    // take (NetworkOptions::label_smoothing). grads may be empty iff
    // options.forward_only.
    static Result<std::unique_ptr<Network>> create(const ModelDescription& model, const NetworkOptions& options,
                                                   std::span<const float> params, std::span<float> grads);
    ~Network();
    Network(const Network&) = delete;
    Network& operator=(const Network&) = delete;

    const ModelDescription& model() const { return model_; }
    const NetworkOptions& options() const { return options_; }
    // The batch the next step reads. input(i): model.inputs[i] when it is float, input_ids(i)
    // when it is int (the other is empty); i defaults to the primary input. labels(): softmax
    // cross-entropy; targets(): [N, T] for the others; a graph loss: its label input's buffer
    // (labels() a spare N that feeds nothing when it has none). REQUIRES: i < model().inputs.size()
    // (std::out_of_range otherwise).
    std::span<float> input(std::size_t i = 0) { return inputs_.at(i).f32; }
    std::span<std::int32_t> input_ids(std::size_t i = 0) { return inputs_.at(i).i32; }
    std::span<std::int32_t> labels();
    std::span<float> targets();

    // Forward (dropout masks from `seed`, batch statistics), loss, backward into the gradient
    // buffer (every trainable tensor's gradient and every state tensor's delta fully
    // overwritten). Returns the loss. REQUIRES: !options().forward_only. A label or an id out
    // of range throws std::out_of_range naming the example.
    float train_step(std::uint64_t seed);
    // Forward only (dropout and batch statistics iff training). Returns the loss; outputs(),
    // predictions() and probabilities() are then valid.
    float forward(bool training, std::uint64_t seed = 0);
    // The model output of the last forward, plain f32 [N, classes].
    std::span<const float> outputs() const;
    // Arg-max class per example (softmax cross-entropy models).
    std::span<const std::int32_t> predictions() const;
    // A graph loss's head k (model().heads order): its scores of the last forward, plain f32
    // [N, width] ([N, width, d1, ...] per position). REQUIRES: k < model().heads.size().
    std::span<const float> head_outputs(std::size_t k) const;
    // Softmax (softmax cross-entropy) or sigmoid (sigmoid cross-entropy) of the outputs, or the
    // outputs themselves (mean squared error), {batch, classes} into `out`.
    // REQUIRES: out.size() == batch * classes (else std::invalid_argument).
    void probabilities(std::span<float> out) const;
    // Tests: backward from `output_grad` (plain f32 [N, classes], dL/d(outputs)) instead of the
    // loss's gradient, after a forward(true). REQUIRES: !options().forward_only.
    void backward_from(std::span<const float> output_grad);
    // dL/d(input i) of the last backward (NetworkOptions::input_gradient and a float input;
    // empty otherwise). REQUIRES: i < model().inputs.size().
    std::span<const float> input_gradient(std::size_t i = 0) const { return inputs_.at(i).grad; }

    // The following steps write into `grads` (same size, else std::invalid_argument; not
    // owned). No primitive rebuilt.
    void set_gradient_buffer(std::span<float> grads);

    // Per-kernel wall time (a clock read around each kernel); off by default.
    void set_profiling(bool on) { profiling_ = on; }
    const std::vector<LayerTime>& layer_times() const { return times_; }
    void reset_layer_times();
    // "3 conv2d+relu fwd: brg:avx512_core", ... for logs.
    std::vector<std::string> implementations() const;
    // The kernels' labels in order ("conv2d+relu+max_pool [hand]", ...).
    std::vector<std::string> kernel_labels() const;
    // What the engine's buffers take (MemoryUse), as built.
    MemoryUse memory_use() const;

  private:
    Network(const ModelDescription& model, const NetworkOptions& options);
    Result<void> build(std::span<const float> params, std::span<float> grads, bool plan_buffers);
    void run_forward();
    void run_backward();

    ModelDescription model_;
    NetworkOptions options_;
    dnnl::engine engine_{dnnl::engine::kind::cpu, 0};
    dnnl::stream stream_{engine_};
    StepState step_;
    // One per model input, in model.inputs order.
    struct InputBuffers {
        std::vector<float> f32;
        std::vector<std::int32_t> i32;
        std::vector<float> grad;
    };
    std::vector<InputBuffers> inputs_;
    std::vector<std::int32_t> spare_labels_;  // a graph loss without a label input: N, read by no one
    std::unique_ptr<NetworkPlan> plan_;
    std::unique_ptr<Loss> loss_;
    bool profiling_ = false;
    bool plan_failed_ = false;      // MemoryUse::plan_failed
    std::vector<LayerTime> times_;  // the kernels, then the loss
};

}  // namespace psrun::nn
