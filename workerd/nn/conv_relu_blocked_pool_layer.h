// conv2d + relu + max_pool 2x2/2 as one Layer: the convolution (ReLU fused as a post-op) on
// oneDNN, writing f32 nChw16c, and the pool on the hand-written AVX-512 kernel
// kernels::BlockedMaxPool (workerd/nn/kernels/max_pool.h), whose backward also applies the
// ReLU's derivative (decided on the pooled output: a window's maximum is > 0 exactly when its
// pooled value is), so the convolution skips its own ReLU backward pass over the 4x larger
// tensor. oneDNN 2.6's pooling on nChw16c spends 2-4x the time its memory traffic needs.
//
// When chosen (matches(), called by Network's make_layer when NetworkOptions::hand_kernels and
// FusedConvReluPoolLayer does not match): the three specs conv2d, relu, max_pool in a row, f32,
// the pool with window 2, stride 2 and no pads, and BlockedMaxPool::supported() for the conv's
// output (AVX-512F, filters a multiple of 16, even height and width). Any conv2d options.
//
// Owns an inner Conv2dLayer (same specs' conv2d and relu, same parameter offset) whose dst()
// is the pool's source; setup(), set_gradient_buffer() and the implementation lines go to it.
// dst() and diff_dst(): f32 nChw16c. Contract otherwise: workerd/nn/layer.h. Threading: oneDNN
// and the kernel's OpenMP loops.
#pragma once

#include <memory>

#include "workerd/nn/conv2d_layer.h"
#include "workerd/nn/kernels/max_pool.h"
#include "workerd/nn/layer.h"

namespace psrun::nn {

class ConvReluBlockedPoolLayer final : public Layer {
public:
    // True when specs[index..index+3) is the pattern above and the CPU runs the kernel.
    static bool matches(std::span<const LayerSpec> specs, int index, const LayerContext& context);

    // REQUIRES: matches(); `specs` are the three specs.
    ConvReluBlockedPoolLayer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
                             std::size_t param_offset);
    ~ConvReluBlockedPoolLayer() override;

    void set_gradient_buffer(std::span<float> grads) override;
    std::string kind_label() const override { return Layer::kind_label() + " [hand]"; }

protected:
    void build(const dnnl::memory& src, const dnnl::memory& diff_src) override;

private:
    std::unique_ptr<Conv2dLayer> conv_;
    std::unique_ptr<kernels::BlockedMaxPool> pool_;
};

}  // namespace psrun::nn
