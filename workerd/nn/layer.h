// The generic layer engine's building block (Caffe-style: one class per layer kind with its
// setup, forward and backward together; the Network only orders them, as in tiny-dnn).
//
// A Layer covers one or more consecutive LayerSpecs of a ModelDescription (first_index() and
// spec_count()): conv2d or dense followed by relu is one layer with ReLU fused as a oneDNN
// post-op. The same mechanism lets a later pattern layer (e.g. a hand-written fused
// conv+relu+max_pool, workerd/nn/conv_relu_pool_layer.h) replace three specs by one Layer.
//
// Contract of setup() (called once by the Network, in order):
//   - `src` is the previous layer's output (or the network input, NCHW f32) in whatever format
//     oneDNN picked; the layer converts it where its primitive wants another format (a reorder
//     in its forward ops, only where the formats differ).
//   - the layer allocates its output dst() (format_tag::any where oneDNN decides) and, when
//     the context trains, diff_dst() with dst()'s exact descriptor: the next layer (or the
//     loss) writes the gradient of the loss w.r.t. dst() there before backward() runs.
//   - `diff_src`, when not empty, has `src`'s descriptor: backward() overwrites it with the
//     gradient w.r.t. src. Empty: the layer computes no data gradient (the first layer).
//   - parameters are read from the flat buffer `params` at param_offset() in plain layouts
//     (conv oihw, dense oi with NHWC-flattened inputs, bias x) on every forward; gradients are
//     written, fully overwriting, into the flat gradient buffer at the same offsets. Neither
//     buffer is owned; both must outlive the layer (or the next set_gradient_buffer()).
// Errors: setup() throws (dnnl::error or std::runtime_error); Network::create turns that
// into a Result naming the layer index, kind and shapes.
// Not thread-safe; primitives run on oneDNN's OpenMP threads. A step allocates nothing.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "workerd/nn/layer_spec.h"

namespace psrun::nn {

// bf16: bf16 activations and weights in the primitives, f32 master weights (the parameter
// buffer) and f32 gradients out.
enum class Precision : std::uint8_t { kF32, kBf16 };
const char* to_string(Precision precision);
// True when oneDNN runs bf16 primitives natively on this CPU (AVX512-BF16 or AMX).
bool engine_bf16_supported();

struct LayerContext {
    dnnl::engine engine;
    dnnl::stream stream;
    std::int64_t batch = 1;
    Precision precision = Precision::kF32;
    bool training = true;  // build backward primitives and buffers
    dnnl::memory::data_type activation_type() const {
        return precision == Precision::kBf16 ? dnnl::memory::data_type::bf16
                                             : dnnl::memory::data_type::f32;
    }
};

// {batch, C} for flat features, {batch, C, H, W} for an image.
dnnl::memory::dims activation_dims(const ActivationShape& shape, std::int64_t batch);
// Plain format of a tensor with `ndims` dimensions (a, nc, ncw, nchw).
dnnl::memory::format_tag plain_tag(int ndims);
const char* kind_name(LayerKind kind);

class Layer {
public:
    // `specs` are the description's layers this one covers (usually one; two when a ReLU is
    // fused); index: the first one's position in the description. param_offset: where the
    // first spec's first parameter tensor starts in the flat buffers.
    Layer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
          std::size_t param_offset);
    virtual ~Layer();
    Layer(const Layer&) = delete;
    Layer& operator=(const Layer&) = delete;

    void setup(const dnnl::memory& src, const dnnl::memory& diff_src,
               std::span<const float> params, std::span<float> grads);
    // Runs the forward ops (dropout: mask iff training).
    virtual void forward(bool training);
    // REQUIRES: context().training and a forward(true) since the last parameter change.
    virtual void backward();
    // Seed of the next step's random choices (dropout); ignored by deterministic layers.
    virtual void set_step_seed(std::uint64_t seed);
    // Points the gradient memories at `grads` (same size as setup's); no primitive rebuilt.
    // A layer that owns inner layers forwards the call to them.
    virtual void set_gradient_buffer(std::span<float> grads);

    const dnnl::memory& dst() const { return dst_; }
    const dnnl::memory& diff_dst() const { return diff_dst_; }
    int first_index() const { return index_; }
    int spec_count() const { return static_cast<int>(specs_.size()); }
    const LayerSpec& spec() const { return specs_.front(); }
    LayerKind kind() const { return specs_.front().kind; }
    // "conv2d+relu", "max_pool", ...; a hand-written kernel appends " [hand]".
    virtual std::string kind_label() const;
    std::size_t param_offset() const { return param_offset_; }
    const LayerContext& context() const { return ctx_; }
    // oneDNN implementation names, e.g. "fwd: brg:avx512_core".
    const std::vector<std::string>& implementations() const { return impls_; }

protected:
    // Kind-specific construction; src/diff_src as in setup(). Throws on failure.
    virtual void build(const dnnl::memory& src, const dnnl::memory& diff_src) = 0;

    using Ops = std::vector<std::function<void()>>;
    dnnl::memory::desc md(const dnnl::memory::dims& dims, dnnl::memory::data_type dt,
                          dnnl::memory::format_tag tag) const {
        return {dims, dt, tag};
    }
    void add(Ops& ops, const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args);
    // `src` if it already has `want`, else a new memory filled by a reorder appended to ops.
    dnnl::memory convert(Ops& ops, const dnnl::memory& src, const dnnl::memory::desc& want);
    // `dst` if it already has `have`, else a new memory that a reorder (appended to `after`,
    // to run after the producer) copies into dst.
    dnnl::memory produce_into(Ops& after, const dnnl::memory& dst, const dnnl::memory::desc& have);
    // Plain f32 memory over parameter tensor `tensor` (0 = weights, 1 = bias) of spec().
    dnnl::memory param(int tensor, const dnnl::memory::dims& dims, dnnl::memory::format_tag tag);
    // Plain f32 memory over the gradient of parameter tensor `tensor`, remembered for
    // set_gradient_buffer().
    dnnl::memory grad(int tensor, const dnnl::memory::dims& dims, dnnl::memory::format_tag tag);
    // Allocates dst_ (and diff_dst_ when training) with `desc`.
    void allocate_output(const dnnl::memory::desc& desc);
    // Views a 2-D {N, C} memory as {N, C, 1, 1} (same bytes); 4-D memories unchanged.
    dnnl::memory as_image(const dnnl::memory& m) const;
    void note(const std::string& what, const dnnl::primitive_desc_base& pd);
    // An implementation line that is not a oneDNN primitive (a hand kernel, an inner layer's).
    void note(const std::string& line) { impls_.push_back(line); }
    bool fused_relu() const { return specs_.size() > 1 && specs_[1].kind == LayerKind::kRelu; }
    // The ReLU post-op when fused_relu(), else empty attributes.
    dnnl::primitive_attr fused_relu_attr() const;
    // Appends ReLU's backward from the saved dst_, in place on diff_dst_ (fused ReLU).
    void add_fused_relu_backward(Ops& ops);

    std::vector<LayerSpec> specs_;
    int index_;
    LayerContext ctx_;
    std::size_t param_offset_;
    std::span<const float> params_;
    std::span<float> grads_;
    Ops fwd_ops_, bwd_ops_;
    dnnl::memory dst_, diff_dst_;

private:
    std::vector<std::pair<dnnl::memory, std::size_t>> grad_memories_;  // memory, offset
    std::vector<std::string> impls_;
};

}  // namespace psrun::nn
