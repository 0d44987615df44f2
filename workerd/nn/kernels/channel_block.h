// The channel block the hand-written kernels (conv1_pool.h, max_pool.h) use on this host, shared
// so that the fused first layer and the pool after conv2 always agree.
// Internal to workerd/nn/kernels.
#pragma once

#include "common/cpu_isa.h"
#include "workerd/nn/kernels/avx2_blocks.h"
#include "workerd/nn/kernels/pool_window.h"

namespace psrun::nn::kernels {

// 16 (AVX-512, nChw16c) where AVX-512 is allowed and 16 divides `channels`; else 8 (AVX2 + FMA,
// nChw8c) where AVX2 is allowed and 8 divides it; else 0 (no hand kernel: oneDNN's). Where
// AVX-512 is allowed it is 16 or nothing: oneDNN's AVX-512 convolutions around the kernels read
// and write nChw8c slower than their own layouts (measured on a 24/40-filter mnist_deep: 3%
// slower with 8-channel blocks than with no hand kernel). Follows ONEDNN_MAX_CPU_ISA
// (common/cpu_isa.h).
inline int channel_block(int channels) {
    if (channels <= 0) return 0;
    if (avx512_allowed()) return channels % kBlock == 0 ? kBlock : 0;
    if (avx2_allowed() && channels % avx2::kBlock8 == 0) return avx2::kBlock8;
    return 0;
}

}  // namespace psrun::nn::kernels
