// conv2d (one input channel) + relu + max_pool 2x2/2 as one Layer on the hand-written AVX-512
// kernel kernels::FusedConv1Pool (workerd/nn/kernels/conv1_pool.h): mnist_deep's first layer.
// The 28x28xC activation never exists; backward routes each pooled gradient to its window's
// arg-max and accumulates the weight and bias gradients directly.
//
// When chosen (matches(), called by Network's make_layer when NetworkOptions::hand_kernels):
// the three specs conv2d, relu, max_pool in a row; the conv has 1 input channel, a square
// kernel with FusedConv1Pool::supported() (AVX-512F, kernel 5, filters a multiple of 16, even
// height and width), stride 1, SAME pads k/2 on every side, a bias; the pool has window 2,
// stride 2, no pads; the layer computes no data gradient (it is the network's first layer, or
// the network is forward-only). In bf16 only when a conv2d follows (it converts the f32 output
// to bf16 in its own forward, as the old Model did).
//
// Formats: src any (converted to plain NCHW f32 if it is not); dst() and diff_dst() f32
// nChw16c in every precision. Parameters: plain oihw weights and bias read from the flat
// buffer at param_offset() on every forward; gradients overwrite the same offsets of the
// current gradient buffer. Contract otherwise: workerd/nn/layer.h. Threading: the kernel's
// OpenMP loops (deterministic for a given thread count).
#pragma once

#include <memory>

#include "workerd/nn/kernels/conv1_pool.h"
#include "workerd/nn/layer.h"

namespace psrun::nn {

class FusedConvReluPoolLayer final : public Layer {
public:
    // True when specs[index..index+3) is the pattern above and the CPU runs the kernel.
    static bool matches(std::span<const LayerSpec> specs, int index, const LayerContext& context);

    // REQUIRES: matches(); `specs` are the three specs.
    FusedConvReluPoolLayer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
                           std::size_t param_offset);
    ~FusedConvReluPoolLayer() override;

    std::string kind_label() const override { return Layer::kind_label() + " [hand]"; }

protected:
    void build(const dnnl::memory& src, const dnnl::memory& diff_src) override;

private:
    std::unique_ptr<kernels::FusedConv1Pool> kernel_;
};

}  // namespace psrun::nn
