// The max-pool step shared by the hand-written AVX-512 blocks (conv1_pool.cpp, max_pool.cpp;
// their AVX2 blocks have their own: avx2_blocks.cpp).
// Internal to workerd/nn/kernels; include only from translation units that check for AVX-512F at run time.
#pragma once

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which -Wmaybe-uninitialized
// reports falsely (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <cstdint>

#include "common/cpu_isa.h"

namespace psrun::nn::kernels {

// Channels per AVX-512 register: the kernels work on nChw16c blocks.
inline constexpr int kBlock = 16;

// avx512_allowed() (common/cpu_isa.h): the CPU has AVX-512F and no ISA cap below AVX-512 is set.

// Stores the ReLU'd max of a 2x2 window's four values of 16 channels (a0 a1 / a2 a3 by window
// row) and, per channel, the position 0..3 of the first maximum (as oneDNN's max-pool keeps).
// ReLU after the max equals the max after ReLU.
__attribute__((target("avx512f"))) inline void pool_window(__m512 a0, __m512 a1, __m512 a2, __m512 a3, float* out,
                                                           std::uint8_t* argmax) {
    __m512 m = a0;
    __m512i idx = _mm512_setzero_si512();
    __mmask16 k = _mm512_cmp_ps_mask(a1, m, _CMP_GT_OQ);
    m = _mm512_mask_mov_ps(m, k, a1);
    idx = _mm512_mask_mov_epi32(idx, k, _mm512_set1_epi32(1));
    k = _mm512_cmp_ps_mask(a2, m, _CMP_GT_OQ);
    m = _mm512_mask_mov_ps(m, k, a2);
    idx = _mm512_mask_mov_epi32(idx, k, _mm512_set1_epi32(2));
    k = _mm512_cmp_ps_mask(a3, m, _CMP_GT_OQ);
    m = _mm512_mask_mov_ps(m, k, a3);
    idx = _mm512_mask_mov_epi32(idx, k, _mm512_set1_epi32(3));
    _mm512_storeu_ps(out, _mm512_max_ps(m, _mm512_setzero_ps()));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(argmax), _mm512_cvtepi32_epi8(idx));
}

}  // namespace psrun::nn::kernels
