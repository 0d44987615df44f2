// Max-pool 2x2/2 on f32 tensors in oneDNN's nChw16c layout, hand-written for AVX-512, or nChw8c
// on AVX2 + FMA (kernels/avx2_blocks.h) where AVX-512 is absent or capped, with the ReLU backward
// of the layer before it fused into the backward pass.
//
// Why: oneDNN 2.6's pooling on this layout spends 2-4x the time its memory traffic needs
// (benchmarks.md), and the preceding convolution's ReLU backward is one more pass over the
// pooled gradient. Same results as oneDNN's max-pool: the first maximum of a window wins.
//
// Threading: OpenMP loops over the batch on the current thread count; one call at a time.
#pragma once

#include <cstdint>
#include <vector>

namespace psrun::nn::kernels {

class BlockedMaxPool {
  public:
    // The layout's channel block B for `channels` on this CPU (under the ISA cap): channel_block()
    // (channel_block.h: 16, 8 or 0), the same as FusedConv1Pool's.
    static int block_for(int channels);
    // True when block_for(channels) != 0, height and width even.
    static bool supported(int channels, int height, int width);

    // REQUIRES: supported(channels, height, width), batch >= 1.
    BlockedMaxPool(int batch, int channels, int height, int width);

    // dst (N x C/B x H/2 x W/2 x B) = max(0, window max of src (N x C/B x H x W x B)): the
    // ReLU is a no-op on the model's already ReLU'd input. Remembers each window's argmax for
    // backward().
    void forward(const float* src, float* dst);

    // Writes every element of d_src: each window's maximum gets d_dst * [dst > 0] (the ReLU
    // that produced src, decided on the pooled value), the other three get 0. `dst` is the
    // output of the last forward().
    void backward(const float* d_dst, const float* dst, float* d_src);

    int block() const { return block_; }  // 16 (nChw16c) or 8 (nChw8c)

  private:
    int batch_, block_, blocks_, height_, width_;
    std::vector<std::uint8_t> argmax_;  // as dst: 0..3 = window row * 2 + column
};

}  // namespace psrun::nn::kernels
