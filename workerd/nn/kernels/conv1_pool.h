// The first layer of mnist_deep, fused: conv KxK (1 input channel, SAME, bias) + ReLU + max-pool
// 2x2/2, forward and backward, f32, hand-written for AVX-512 (16 channels a block) and for AVX2
// + FMA (8 channels a block: kernels/avx2_blocks.h) where AVX-512 is absent or capped.
//
// Why: oneDNN 2.6 has no pooling post-op, so the unfused layer writes the 28x28xC activation
// (10 MB at batch 100), reads it back to pool, and in backward zero-fills and scatters 10 MB
// again before conv1's weight gradient reads it. With one input channel the convolution itself
// is tiny (25 multiply-adds per output), so those memory passes are most of the layer's time.
// Fused, the activation never exists: forward computes the four convolution outputs of each
// pooling window in registers and keeps their max and its position (one byte); backward routes
// each pooled gradient to that position and accumulates the weight and bias gradients directly.
//
// Layouts: input plain N x H x W; weights oihw (C x 1 x K x K) and bias C; pooled output and
// its gradient in oneDNN's nChw<B>c (N x C/B x H/2 x W/2 x B, B = block(): 16 with AVX-512, 8
// with AVX2), the layout conv2 reads on that ISA.
// Results equal the unfused layer's up to float summation order (the max-pool keeps the first
// maximum of a window, as oneDNN does).
//
// Threading: forward() and backward() run OpenMP loops on the current thread count; one call at
// a time per object. The weight gradient is reduced in a fixed order: deterministic for a given
// thread count.
#pragma once

#include <cstdint>
#include <vector>

namespace psrun::nn::kernels {

class FusedConv1Pool {
  public:
    // The channels a block holds for `channels` on this CPU (under the ISA cap): channel_block()
    // (channel_block.h: 16, 8 or 0), the same as BlockedMaxPool's.
    static int block_for(int channels);
    // True when this CPU and these dimensions are supported: block_for(channels) != 0, kernel 5,
    // height and width even.
    static bool supported(int height, int width, int channels, int kernel);

    // REQUIRES: supported(height, width, channels, kernel), batch >= 1.
    FusedConv1Pool(int batch, int height, int width, int channels, int kernel);

    // pooled = maxpool(relu(conv(input, weights) + bias)); remembers each window's argmax.
    void forward(const float* input, const float* weights, const float* bias, float* pooled);

    // Overwrites d_weights (C x K x K) and d_bias (C) with the gradients of the loss, given the
    // gradient w.r.t. the pooled output and the pooled output of the last forward() (for the
    // ReLU: a window whose max is <= 0 passes no gradient).
    void backward(const float* d_pooled, const float* pooled, float* d_weights, float* d_bias);

    // The output layout's channel block: 16 (nChw16c) or 8 (nChw8c).
    int block() const { return block_; }

  private:
    int batch_, height_, width_, channels_, kernel_, block_;
    int padded_height_, padded_width_;
    std::vector<float> padded_;         // N x (H+K-1) x (W+K-1), zero borders
    std::vector<float> weights_t_;      // C/B x K*K x B: the B channels of a tap together
    std::vector<std::uint8_t> argmax_;  // as pooled: 0..3 = window row * 2 + column
    std::vector<float> accumulators_;   // threads x C/B x (K*K + 1) x B
};

}  // namespace psrun::nn::kernels
