// The AVX2 + FMA blocks of the hand kernels (conv1_pool.h, max_pool.h): the same computations as
// their AVX-512 blocks on 8 channels at a time (oneDNN's nChw8c, the layout its AVX2
// convolutions read and write) instead of 16, for hosts or ISA caps without AVX-512F.
// Internal to workerd/nn/kernels; call only where avx2_allowed() (common/cpu_isa.h) holds.
// Each function works on one image's block of 8 channels; no state, thread-safe.
#pragma once

#include <cstdint>

namespace psrun::nn::kernels::avx2 {

inline constexpr int kBlock8 = 8;

// FusedConv1Pool's 5x5 convolution + bias + ReLU + max-pool 2x2/2 of one block. x: the padded
// image (row pitch pw); w: 25 taps x 8 weights; b: 8 biases; out/am: oh_n x ow_n x 8 pooled
// values and the 0..3 position of each window's first maximum.
void conv1_pool_forward(const float* x, int pw, const float* w, const float* b, int oh_n, int ow_n, float* out,
                        std::uint8_t* am);

// Adds one block's weight (25 taps x 8) and bias (8) gradients into acc (26 x 8), routing each
// pooled gradient dp to its window's arg-max (am) where the pooled value is > 0 (the ReLU).
void conv1_pool_backward(const float* x, int pw, const float* dp, const float* pooled, const std::uint8_t* am, int oh_n,
                         int ow_n, float* acc);

// BlockedMaxPool on one block: src h x w x 8 -> dst h/2 x w/2 x 8 (ReLU'd maxima) and am.
void max_pool_forward(const float* src, int h, int w, float* dst, std::uint8_t* am);

// Writes every element of d_src (h x w x 8): a window's maximum gets d_dst * [dst > 0], the
// other three 0.
void max_pool_backward(const float* d_dst, const float* dst, const std::uint8_t* am, int h, int w, float* d_src);

}  // namespace psrun::nn::kernels::avx2
