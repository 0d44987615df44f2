// Internals of Model shared by model.cpp (execution) and model_build.cpp (construction).
#pragma once

#include <chrono>
#include <cstring>
#include <functional>
#include <unordered_map>

#include <oneapi/dnnl/dnnl.hpp>

#include "workerd/nn/kernels/conv1_pool.h"
#include "workerd/nn/kernels/max_pool.h"
#include "workerd/model.h"

namespace psrun::worker {

using nn::kernels::BlockedMaxPool;
using nn::kernels::FusedConv1Pool;
using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

// One step of a pass: a primitive (or a hand-written loop) attributed to a layer.
struct Op {
    Layer layer;
    std::function<void()> run;
};

inline float bf16_to_f32(std::uint16_t v) {
    const std::uint32_t u = std::uint32_t{v} << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}

inline std::uint16_t f32_to_bf16(float f) {  // round to nearest even
    std::uint32_t u;
    std::memcpy(&u, &f, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    return static_cast<std::uint16_t>(u >> 16);
}

struct Model::Impl {
    Impl(const ModelConfig& config, const ParameterSet& params, ParameterSet& grads);

    // Construction helpers (model_build.cpp).
    memory::desc md(const memory::dims& dims, Dt dt, Tag tag) const { return {dims, dt, tag}; }
    memory wrap(const memory::dims& dims, Tag tag, const float* data) const;
    void add(std::vector<Op>& ops, Layer layer, const dnnl::primitive& p,
             std::unordered_map<int, memory> args);
    // Returns `src` if it already has `want`, else a new memory filled by a reorder added to ops.
    memory convert(std::vector<Op>& ops, Layer layer, const memory& src, const memory::desc& want);
    // Returns `dst` if it already has `have`, else a new memory whose contents a reorder
    // (added to `after`, to run after the producer) copies into dst.
    memory produce_into(std::vector<Op>& after, Layer layer, const memory& dst,
                        const memory::desc& have);
    // A plain memory over gradient tensor i, remembered for set_gradient_buffer().
    memory grad(const memory::dims& dims, Tag tag, int i);
    void build_forward();
    void build_conv1_pool1();
    void build_backward();
    void build_conv1_pool1_backward();

    // Hand-written steps (model.cpp).
    void run_input();
    void run_dropout();
    void run_loss();
    void run_dropout_backward();
    void run(const std::vector<Op>& ops, bool backward);

    ModelConfig cfg;
    const ParameterSet& params;
    ParameterSet& grads;
    Dt adt;  // activation / compute data type
    dnnl::engine eng{dnnl::engine::kind::cpu, 0};
    dnnl::stream strm{eng};

    std::vector<Op> fwd_ops, bwd_ops;
    std::vector<std::pair<std::string, dnnl::primitive_desc_base>> pds;

    // Pass state.
    bool training = false;
    bool backward_pass = false;
    std::uint64_t dropout_seed = 0;
    float loss = 0;
    bool profiling = false;
    std::array<LayerTime, static_cast<int>(Layer::kCount)> times{};

    // Host-side buffers.
    std::vector<float> input;
    std::vector<std::int32_t> labels, predictions;

    // oneDNN memories.
    memory user_input, conv1_src, conv1_dst, pool1_dst, pool1_ws, conv2_src, conv2_dst, pool2_dst,
        pool2_ws, fc1_src, fc1_src_4d, fc1_dst, logits, dlogits, d_fc1_dst, d_fc1_src_4d,
        d_pool2_dst, d_conv2_dst, d_pool1_dst, d_conv1_dst;
    dnnl::pooling_forward::primitive_desc pool1_pd, pool2_pd;
    dnnl::convolution_forward::primitive_desc conv1_pd, conv2_pd;
    dnnl::inner_product_forward::primitive_desc fc1_pd, fc2_pd;
    memory fc1_weights, fc2_weights, conv2_weights;
    std::unordered_map<int, memory> layer_outputs;
    // conv1 + ReLU + pool1 hand-fused (f32, AVX-512), or null: oneDNN primitives.
    std::unique_ptr<FusedConv1Pool> conv1_pool;
    // pool2 (+ conv2's ReLU backward) hand-written (f32, AVX-512), or null: oneDNN primitives.
    std::unique_ptr<BlockedMaxPool> pool2;
    // The memories backward writes each parameter's gradient into (plain layout, ParameterSet
    // tensor index): set_gradient_buffer() points them at another buffer.
    std::vector<std::pair<memory, int>> grad_memories;
};

}  // namespace psrun::worker
