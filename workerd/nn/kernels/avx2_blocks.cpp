#include "workerd/nn/kernels/avx2_blocks.h"

#include <immintrin.h>

#include <cstddef>

namespace psrun::nn::kernels::avx2 {
namespace {

constexpr int kK = 5;  // the convolution's kernel size, as conv1_pool.cpp
constexpr int kTaps = kK * kK;

#define PSRUN_AVX2 __attribute__((target("avx2,fma")))

// Stores the ReLU'd max of a 2x2 window's four values of 8 channels (a0 a1 / a2 a3 by window row)
// and, per channel, the position 0..3 of the first maximum (strictly greater replaces, as
// oneDNN's max-pool and pool_window.h keep the first).
PSRUN_AVX2 inline void pool_window8(__m256 a0, __m256 a1, __m256 a2, __m256 a3, float* out, std::uint8_t* argmax) {
    __m256 m = a0;
    __m256i idx = _mm256_setzero_si256();
    __m256 k = _mm256_cmp_ps(a1, m, _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, a1, k);
    idx = _mm256_blendv_epi8(idx, _mm256_set1_epi32(1), _mm256_castps_si256(k));
    k = _mm256_cmp_ps(a2, m, _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, a2, k);
    idx = _mm256_blendv_epi8(idx, _mm256_set1_epi32(2), _mm256_castps_si256(k));
    k = _mm256_cmp_ps(a3, m, _CMP_GT_OQ);
    m = _mm256_blendv_ps(m, a3, k);
    idx = _mm256_blendv_epi8(idx, _mm256_set1_epi32(3), _mm256_castps_si256(k));
    _mm256_storeu_ps(out, _mm256_max_ps(m, _mm256_setzero_ps()));
    // The low byte of each 32-bit position: bytes 0, 4, 8, 12 of each 128-bit lane to its front.
    const __m256i bytes =
        _mm256_shuffle_epi8(idx, _mm256_setr_epi8(0, 4, 8, 12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, 0, 4, 8,
                                                  12, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1, -1));
    const __m128i packed = _mm_unpacklo_epi32(_mm256_castsi256_si128(bytes), _mm256_extracti128_si256(bytes, 1));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(argmax), packed);
}

// The 8 positions 0..3 of am[0..7] as 32-bit integers.
PSRUN_AVX2 inline __m256i load_positions(const std::uint8_t* am) {
    return _mm256_cvtepu8_epi32(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(am)));
}

// Sums the 5x5 taps of kWindows side-by-side windows (one every 2 columns of p) into four
// accumulators each (the window's four outputs: a[4 * k + q]), from rows r0, r1: two windows give
// eight independent multiply-add chains, as the AVX-512 block has.
template <int kWindows>
PSRUN_AVX2 inline void window_taps(const float* p, int pw, const float* w, __m256 (&a)[4 * kWindows]) {
    for (int kh = 0; kh < kK; ++kh) {
        const float* r0 = p + kh * pw;
        const float* r1 = r0 + pw;
        for (int kw = 0; kw < kK; ++kw) {
            const __m256 wv = _mm256_loadu_ps(w + (kh * kK + kw) * kBlock8);
            for (int k = 0; k < kWindows; ++k) {
                const int c = kw + 2 * k;
                a[4 * k] = _mm256_fmadd_ps(_mm256_broadcast_ss(r0 + c), wv, a[4 * k]);
                a[4 * k + 1] = _mm256_fmadd_ps(_mm256_broadcast_ss(r0 + c + 1), wv, a[4 * k + 1]);
                a[4 * k + 2] = _mm256_fmadd_ps(_mm256_broadcast_ss(r1 + c), wv, a[4 * k + 2]);
                a[4 * k + 3] = _mm256_fmadd_ps(_mm256_broadcast_ss(r1 + c + 1), wv, a[4 * k + 3]);
            }
        }
    }
}

// Window row oh's outputs from column ow on, kWindows windows at once, pooled into out/am.
template <int kWindows>
PSRUN_AVX2 inline void conv1_pool_windows(const float* x, int pw, const float* w, __m256 bias, int oh, int ow, int ow_n,
                                          float* out, std::uint8_t* am) {
    __m256 a[4 * kWindows];
    for (auto& v : a) v = bias;
    window_taps<kWindows>(x + (2 * oh) * pw + 2 * ow, pw, w, a);
    for (int k = 0; k < kWindows; ++k) {
        const int o = (oh * ow_n + ow + k) * kBlock8;
        pool_window8(a[4 * k], a[4 * k + 1], a[4 * k + 2], a[4 * k + 3], out + o, am + o);
    }
}

}  // namespace

PSRUN_AVX2 void conv1_pool_forward(const float* x, int pw, const float* w, const float* b, int oh_n, int ow_n,
                                   float* out, std::uint8_t* am) {
    const __m256 bias = _mm256_loadu_ps(b);
    for (int oh = 0; oh < oh_n; ++oh) {
        int ow = 0;
        for (; ow + 1 < ow_n; ow += 2) conv1_pool_windows<2>(x, pw, w, bias, oh, ow, ow_n, out, am);
        if (ow < ow_n) conv1_pool_windows<1>(x, pw, w, bias, oh, ow, ow_n, out, am);
    }
}

// 16 registers cannot hold the 25 taps' accumulators as the AVX-512 block does: each window's
// gradient is split by position first (four masked vectors, zero where no channel's maximum is
// there), then every tap is read, updated from all four and written once. A fixed four keeps the
// tap loop free of branches (a loop over only the positions used mispredicted at every tap).
PSRUN_AVX2 void conv1_pool_backward(const float* x, int pw, const float* dp, const float* pooled,
                                    const std::uint8_t* am, int oh_n, int ow_n, float* acc) {
    __m256 gb = _mm256_loadu_ps(acc + kTaps * kBlock8);
    const __m256 zero = _mm256_setzero_ps();
    for (int oh = 0; oh < oh_n; ++oh) {
        for (int ow = 0; ow < ow_n; ++ow) {
            const int o = (oh * ow_n + ow) * kBlock8;
            const __m256 live = _mm256_cmp_ps(_mm256_loadu_ps(pooled + o), zero, _CMP_GT_OQ);
            if (_mm256_movemask_ps(live) == 0) continue;
            const __m256 d = _mm256_and_ps(live, _mm256_loadu_ps(dp + o));
            gb = _mm256_add_ps(gb, d);
            const __m256i idx = load_positions(am + o);
            const auto at = [&](int q) {
                return _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(idx, _mm256_set1_epi32(q))), d);
            };
            const __m256 d0 = at(0), d1 = at(1), d2 = at(2), d3 = at(3);
            const float* p0 = x + (2 * oh) * pw + 2 * ow;  // the window's top-left output's taps
            const float* p2 = p0 + pw;
            for (int kh = 0; kh < kK; ++kh) {
                for (int kw = 0; kw < kK; ++kw) {
                    float* a = acc + (kh * kK + kw) * kBlock8;
                    const int off = kh * pw + kw;
                    __m256 g = _mm256_loadu_ps(a);
                    g = _mm256_fmadd_ps(_mm256_broadcast_ss(p0 + off), d0, g);
                    g = _mm256_fmadd_ps(_mm256_broadcast_ss(p0 + off + 1), d1, g);
                    g = _mm256_fmadd_ps(_mm256_broadcast_ss(p2 + off), d2, g);
                    g = _mm256_fmadd_ps(_mm256_broadcast_ss(p2 + off + 1), d3, g);
                    _mm256_storeu_ps(a, g);
                }
            }
        }
    }
    _mm256_storeu_ps(acc + kTaps * kBlock8, gb);
}

PSRUN_AVX2 void max_pool_forward(const float* src, int h, int w, float* dst, std::uint8_t* am) {
    const int oh_n = h / 2, ow_n = w / 2;
    for (int oh = 0; oh < oh_n; ++oh) {
        const float* r0 = src + static_cast<std::ptrdiff_t>(2 * oh) * w * kBlock8;
        const float* r1 = r0 + static_cast<std::ptrdiff_t>(w) * kBlock8;
        for (int ow = 0; ow < ow_n; ++ow) {
            const int c = 2 * ow * kBlock8, o = (oh * ow_n + ow) * kBlock8;
            pool_window8(_mm256_loadu_ps(r0 + c), _mm256_loadu_ps(r0 + c + kBlock8), _mm256_loadu_ps(r1 + c),
                         _mm256_loadu_ps(r1 + c + kBlock8), dst + o, am + o);
        }
    }
}

PSRUN_AVX2 void max_pool_backward(const float* d_dst, const float* dst, const std::uint8_t* am, int h, int w,
                                  float* d_src) {
    const int oh_n = h / 2, ow_n = w / 2;
    const __m256 zero = _mm256_setzero_ps();
    for (int oh = 0; oh < oh_n; ++oh) {
        float* r0 = d_src + static_cast<std::ptrdiff_t>(2 * oh) * w * kBlock8;
        float* r1 = r0 + static_cast<std::ptrdiff_t>(w) * kBlock8;
        for (int ow = 0; ow < ow_n; ++ow) {
            const int c = 2 * ow * kBlock8, o = (oh * ow_n + ow) * kBlock8;
            const __m256 live = _mm256_cmp_ps(_mm256_loadu_ps(dst + o), zero, _CMP_GT_OQ);
            const __m256 g = _mm256_and_ps(live, _mm256_loadu_ps(d_dst + o));
            const __m256i idx = load_positions(am + o);
            float* at[4] = {r0 + c, r0 + c + kBlock8, r1 + c, r1 + c + kBlock8};
            for (int q = 0; q < 4; ++q)
                _mm256_storeu_ps(at[q],
                                 _mm256_and_ps(_mm256_castsi256_ps(_mm256_cmpeq_epi32(idx, _mm256_set1_epi32(q))), g));
        }
    }
}

#undef PSRUN_AVX2

}  // namespace psrun::nn::kernels::avx2
