// The engine's building block: a Kernel computes one node of the graph (or a fused group of
// nodes, fusion.h) forward and backward on oneDNN primitives or hand-written code.
// Caffe-style, one class per kind with its setup, forward and backward together; the Network
// (network.h) only orders the kernels, owns the values' memories and routes the gradients.
//
// Contract of build(), called once per kernel in topological order:
//   - Inputs are values in whatever format their producer picked (input()); a kernel that
//     wants another format or type asks input_as(), which adds a reorder to its forward work
//     (shared with other consumers that want the same).
//   - The kernel creates each output with make_output(desc) in the format it computes (or
//     alias_output() for a view of an input); the output's gradient memory has that desc.
//     Memories the Network makes (outputs, gradients, conversions, scratch()) hold their
//     contents within one step only, from the kernel's forward to its and its readers' last
//     use (buffer_plan.h): write outputs in the forward work, not at build, except a kernel
//     that reads only tensors (a constant), whose outputs stay out of the plan.
//   - Backward: output_diff(i, want) is dL/d(output i), converted to `want` before the
//     kernel's backward work runs; input_diff(i, have) is where the kernel writes
//     dL/d(input i), fully overwriting, in `have`; the Network adds the copies and sums that
//     fan-out, shared tensors and format changes need after the kernel's backward work, in the
//     order the kernel asked (any order is right). Ask input_diff exactly where
//     needs_input_grad(i): build fails naming the kernel and the input it left out.
//   - Tensors (parameters) are inputs like any other: plain f32 memories over the flat
//     parameter buffer (read on every step, so updates show without rebuilding); their
//     gradients go to the flat gradient buffer through input_diff. A state tensor (batch norm's
//     running statistics) has no gradient: state_delta(i) is where a training forward writes
//     old - new (model_description.h, TensorClass).
//   - Work is recorded as closures over memories (forward(), backward()): a step runs them in
//     order and allocates nothing. Read data handles at run time (memories over the gradient
//     buffer are re-pointed when it changes).
// Errors: build() throws (dnnl::error, std::runtime_error); the Network turns that into a
// Result naming the node, its kind, shapes, batch and precision.
// Not thread-safe; primitives and hand loops run on oneDNN's OpenMP threads.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "workerd/nn/model_description.h"

namespace psrun::nn {

// bf16: bf16 activations and weights in the primitives, f32 master weights (the parameter
// buffer), f32 gradients out, f32 model output.
enum class Precision : std::uint8_t { kF32, kBf16 };
const char* to_string(Precision precision);
// True when oneDNN runs bf16 primitives natively on this CPU (AVX512-BF16 or AMX).
bool engine_bf16_supported();

struct EngineContext {
    dnnl::engine engine;
    dnnl::stream stream;
    std::int64_t batch = 1;
    Precision precision = Precision::kF32;
    bool training = true;      // backward work and gradient memories are built
    bool hand_kernels = true;  // NetworkOptions::hand_kernels: hand-written kernels where they apply
    dnnl::memory::data_type activation_type() const {
        return precision == Precision::kBf16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
    }
};

// What a step tells the kernels; the Network sets it before running them.
struct StepState {
    std::uint64_t seed = 0;  // this step's random seed (dropout masks)
    bool training = true;    // the forward trains (dropout, batch statistics)
};

// Plain format of a tensor with `ndims` dimensions (a, ab, abc, abcd, ...).
dnnl::memory::format_tag plain_tag(int ndims);
dnnl::memory::desc plain_desc(const dnnl::memory::dims& dims, dnnl::memory::data_type type);

class KernelBuilder;

// What a kernel's backward work reads of the values its forward saw, as PyTorch's autograd
// saves tensors for a node's backward: the buffer plan (buffer_lifetimes.h) keeps a value past
// its last forward reader only while some backward reads it. What a kernel keeps in memories of
// its own (workspaces, statistics, scratch()) is not declared here.
struct BackwardReads {
    static constexpr std::uint64_t kAllInputs = ~std::uint64_t{0};
    // Bit i: input slot i (build()'s input(i), as converted or not); slots from 64 on count as read.
    std::uint64_t inputs = kAllInputs;
    bool outputs = true;  // any of its outputs
    // In place: make_output(0) may return the memory of input slot `in_place` (-1: never) when
    // that input is a planned value with output 0's desc that no later step reads (so neither
    // does this kernel's backward). The kernel's forward must be right with output 0 and that
    // input being the same memory, element by element.
    int in_place = -1;
    // Output 0 is always a view of input slot `view` (-1: none): alias_output() of its memory, or
    // of the conversion input_plain() made; that input lives as long as the output.
    int view = -1;
    // What the backward does with output 0's gradient, for sharing gradient buffers
    // (buffer_lifetimes.h share_gradients): bit i of `copies_output_grad` says it adds output 0's
    // gradient, unchanged after any fused relu's backward, into input slot i's where the two have
    // the same dims (an add's inputs, a sub's first); `keeps_output_grad` says it only reads that
    // gradient (a fused relu's backward changes it in place, so a kernel with one leaves it false).
    std::uint64_t copies_output_grad = 0;
    bool keeps_output_grad = false;
    // Bit i: the backward reads input slot i only through the memory input_as()/input_plain()
    // returned for it, never input(i) itself. Where that is a conversion (known from a first
    // build, BuildLessons::converted), the value dies at its last forward read and only the
    // conversion is kept for the backward, not both.
    std::uint64_t as_converted = 0;
    // Reads needed only for some inputs' gradients: bit j of input_for[i] (i < 4) says the
    // backward reads input slot i only to compute input slot j's gradient, and of outputs_for
    // that it reads its outputs only for those; 0: whatever needs a gradient. Where none of those
    // inputs needs one (a division by a constant), the read is dropped before any buffer is
    // placed (a / c keeps neither a nor its output).
    std::array<std::uint64_t, 4> input_for{};
    std::uint64_t outputs_for = 0;
    // A second slot output 0 may be written over, on the same terms as `in_place`, where that
    // slot's input cannot be (it lives on, or it broadcasts): where(c, x, y) over x or y.
    int in_place_else = -1;
    // Bit i: the backward may write input slot i's gradient over output 0's gradient, element by
    // element, where the two have the same dims (an eltwise backward, where's); share_gradients
    // picks at most one such slot. The kernel sees it as input_diff(i) returning output_diff(0)'s
    // memory, and then computes every other input's gradient first.
    std::uint64_t grad_over_output = 0;

    bool reads_input(std::size_t i) const { return i >= 64 || ((inputs >> i) & 1u) != 0; }
    bool copies_output_grad_to(std::size_t i) const { return i < 64 && ((copies_output_grad >> i) & 1u) != 0; }
    bool writes_grad_over_output(std::size_t i) const { return i < 64 && ((grad_over_output >> i) & 1u) != 0; }
    bool reads_converted(std::size_t i) const { return reads_input(i) && i < 64 && ((as_converted >> i) & 1u) != 0; }
    static BackwardReads nothing() { return BackwardReads{0, false, -1, -1}; }
};

class Kernel {
  public:
    virtual ~Kernel() = default;
    virtual void build(KernelBuilder& b) = 0;
    // What build() over `nodes` makes its backward read (BackwardReads), asked before any kernel
    // of the network builds. The default, every input and output, is right for any kernel and
    // keeps the most memory; a kernel that declares less must read no more (test: the freed
    // buffers' poison, buffer_lifetimes.h).
    virtual BackwardReads backward_reads(const std::vector<const Node*>& nodes, const EngineContext& context) const {
        (void)nodes;
        (void)context;
        return {};
    }
    // " [hand]" for hand-written kernels (appended to the kind label).
    virtual std::string label_suffix() const { return ""; }
};

using Op = std::function<void()>;

// The per-kernel view of the Network during build (implemented in network_build.cpp).
class KernelBuilder {
  public:
    virtual ~KernelBuilder() = default;

    virtual const EngineContext& context() const = 0;
    virtual const StepState& step() const = 0;
    // The nodes this kernel covers (one, or a fused group in graph order).
    virtual const std::vector<const Node*>& nodes() const = 0;
    const Node& node() const { return *nodes().front(); }

    virtual std::size_t input_count() const = 0;
    virtual const ValueInfo& input_info(std::size_t i) const = 0;
    virtual dnnl::memory::dims input_dims(std::size_t i) const = 0;
    // The tensor input i is (nullptr: a computed value).
    virtual const TensorDef* input_tensor(std::size_t i) const = 0;
    virtual const dnnl::memory& input(std::size_t i) const = 0;
    virtual dnnl::memory input_as(std::size_t i, const dnnl::memory::desc& want) = 0;
    dnnl::memory input_plain(std::size_t i, dnnl::memory::data_type type) {
        return input_as(i, plain_desc(input_dims(i), type));
    }

    virtual std::size_t output_count() const = 0;
    virtual dnnl::memory::dims output_dims(std::size_t i) const = 0;
    // The data type output i should have: the activation type, f32 for the model's output,
    // s32 for integer values.
    virtual dnnl::memory::data_type output_type(std::size_t i) const = 0;
    virtual dnnl::memory make_output(std::size_t i, const dnnl::memory::desc& desc) = 0;
    virtual void alias_output(std::size_t i, const dnnl::memory& memory) = 0;

    // True when this kernel's backward runs (training, and some input needs a gradient).
    virtual bool needs_backward() const = 0;
    virtual bool needs_input_grad(std::size_t i) const = 0;
    virtual dnnl::memory output_diff(std::size_t i, const dnnl::memory::desc& want) = 0;
    virtual dnnl::memory input_diff(std::size_t i, const dnnl::memory::desc& have) = 0;
    // REQUIRES: input i is a state tensor and the context trains.
    virtual dnnl::memory state_delta(std::size_t i) = 0;

    // A memory of the kernel's own, planned with the engine's buffers: its contents hold during
    // this kernel's forward work and, unless `backward_only`, until its backward work of the
    // same step ends; backward_only: during its backward work only. Nothing written at build or
    // in another step survives. A kernel may alias_output() it.
    virtual dnnl::memory scratch(const dnnl::memory::desc& desc, bool backward_only) = 0;

    virtual void forward(Op op) = 0;
    virtual void backward(Op op) = 0;
    void forward(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args);
    void backward(const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args);
    // oneDNN implementation names and hand kernels, for logs: "fwd: brg:avx512_core".
    virtual void note(const std::string& line) = 0;
    void note(const std::string& what, const dnnl::primitive_desc_base& pd) { note(what + ": " + pd.impl_info_str()); }
};

// `m` if it has `want` already, else a new memory that a reorder fills at that point of the
// kernel's forward (forward_convert) or backward (backward_convert) work.
dnnl::memory forward_convert(KernelBuilder& b, const dnnl::memory& m, const dnnl::memory::desc& want);
dnnl::memory backward_convert(KernelBuilder& b, const dnnl::memory& m, const dnnl::memory::desc& want);
// Adds ReLU's backward to the backward work, in place on `diff` (dL/d(relu output)), from the
// ReLU's output `dst`: what a ReLU fused as a post-op needs before the producer's backward.
void add_relu_backward(KernelBuilder& b, const dnnl::memory& dst, const dnnl::memory& diff);

}  // namespace psrun::nn
