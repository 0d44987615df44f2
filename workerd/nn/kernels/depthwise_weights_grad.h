// The weight (and bias) gradient of a depthwise 2-D convolution (groups = channels = filters:
// ConvNeXt's 7x7, MobileNet's 3x3 and 5x5), f32, reading the source and the output gradient in
// the channel-blocked layout oneDNN's depthwise forward gives them (nChw8c on AVX2, nChw16c on
// AVX-512): each window tap is one multiply-add over a block of channels.
//
// Why: oneDNN 2.6 has no jit depthwise weight gradient for these shapes and falls back to
// im2col + gemm on plain layouts (x64:gemm:jit), with reorders of both operands: 15 ms for a
// 20 MFLOP layer (ConvNeXt's 7x7 on 7x7 maps, batch 128; docs/benchmarks.md).
//
// Sums: in f32 per (example, channel block), then in double over the examples, per thread over
// a static share of the (block, example) pairs, then the threads' sums in thread order.
// Threading: OpenMP over the current thread count; one run() at a time per object.
#pragma once

#include <cstdint>
#include <vector>

namespace psrun::nn::kernels {

struct DepthwiseShape {
    std::int64_t n = 1, c = 1, ih = 1, iw = 1, oh = 1, ow = 1;
    std::int64_t kh = 1, kw = 1, sh = 1, sw = 1, pt = 0, pl = 0;  // no dilation
    std::int64_t lanes = 8;                                       // the layout's channel block: 8 or 16
};

class DepthwiseWeightsGrad {
  public:
    // REQUIRES: lanes 8 or 16, sizes >= 1 (std::invalid_argument otherwise).
    explicit DepthwiseWeightsGrad(const DepthwiseShape& shape);

    // src: [N, C/lanes, IH, IW, lanes], diff_dst: [N, C/lanes, OH, OW, lanes] (channels padded to
    // a multiple of lanes). Writes dw [C, 1, KH, KW] (PyTorch's layout) and, when db is not
    // null, db [C]: overwritten, not accumulated.
    void run(const float* src, const float* diff_dst, float* dw, float* db);

  private:
    void accumulate(const float* src, const float* diff_dst, std::int64_t item, float* taps, float* bias) const;

    DepthwiseShape s_;
    std::int64_t blocks_;
    std::vector<double> partial_;  // threads x blocks x (KH * KW + 1) x lanes
};

}  // namespace psrun::nn::kernels
