#include "workerd/nn/kernels/conv1_pool.h"

#include <omp.h>

#include <algorithm>
#include <cassert>
#include <cstring>

#include "workerd/nn/kernels/avx2_blocks.h"
#include "workerd/nn/kernels/channel_block.h"
#include "workerd/nn/kernels/pool_window.h"

namespace psrun::nn::kernels {

namespace {

constexpr int kK = 5;  // kernel size the kernels are unrolled for
constexpr int kTaps = kK * kK;

// One image, one block of 16 channels. x: the padded image (row pitch pw); w: kTaps x 16
// weights; out/am: the block's pooled outputs and argmax, oh x ow x 16. Two windows at a time:
// eight independent multiply-add chains keep both FMA units busy.
__attribute__((target("avx512f"))) void forward_block(const float* x, int pw, const float* w, const float* b, int oh_n,
                                                      int ow_n, float* out, std::uint8_t* am) {
    const __m512 bias = _mm512_loadu_ps(b);
    for (int oh = 0; oh < oh_n; ++oh) {
        int ow = 0;
        for (; ow + 1 < ow_n; ow += 2) {
            const float* p = x + (2 * oh) * pw + 2 * ow;
            __m512 a0 = bias, a1 = bias, a2 = bias, a3 = bias;
            __m512 c0 = bias, c1 = bias, c2 = bias, c3 = bias;
            for (int kh = 0; kh < kK; ++kh) {
                const float* r0 = p + kh * pw;
                const float* r1 = r0 + pw;
                for (int kw = 0; kw < kK; ++kw) {
                    const __m512 wv = _mm512_loadu_ps(w + (kh * kK + kw) * kBlock);
                    a0 = _mm512_fmadd_ps(_mm512_set1_ps(r0[kw]), wv, a0);
                    a1 = _mm512_fmadd_ps(_mm512_set1_ps(r0[kw + 1]), wv, a1);
                    a2 = _mm512_fmadd_ps(_mm512_set1_ps(r1[kw]), wv, a2);
                    a3 = _mm512_fmadd_ps(_mm512_set1_ps(r1[kw + 1]), wv, a3);
                    c0 = _mm512_fmadd_ps(_mm512_set1_ps(r0[kw + 2]), wv, c0);
                    c1 = _mm512_fmadd_ps(_mm512_set1_ps(r0[kw + 3]), wv, c1);
                    c2 = _mm512_fmadd_ps(_mm512_set1_ps(r1[kw + 2]), wv, c2);
                    c3 = _mm512_fmadd_ps(_mm512_set1_ps(r1[kw + 3]), wv, c3);
                }
            }
            const int o = (oh * ow_n + ow) * kBlock;
            pool_window(a0, a1, a2, a3, out + o, am + o);
            pool_window(c0, c1, c2, c3, out + o + kBlock, am + o + kBlock);
        }
        for (; ow < ow_n; ++ow) {
            const float* p = x + (2 * oh) * pw + 2 * ow;
            __m512 a0 = bias, a1 = bias, a2 = bias, a3 = bias;
            for (int kh = 0; kh < kK; ++kh) {
                const float* r0 = p + kh * pw;
                const float* r1 = r0 + pw;
                for (int kw = 0; kw < kK; ++kw) {
                    const __m512 wv = _mm512_loadu_ps(w + (kh * kK + kw) * kBlock);
                    a0 = _mm512_fmadd_ps(_mm512_set1_ps(r0[kw]), wv, a0);
                    a1 = _mm512_fmadd_ps(_mm512_set1_ps(r0[kw + 1]), wv, a1);
                    a2 = _mm512_fmadd_ps(_mm512_set1_ps(r1[kw]), wv, a2);
                    a3 = _mm512_fmadd_ps(_mm512_set1_ps(r1[kw + 1]), wv, a3);
                }
            }
            const int o = (oh * ow_n + ow) * kBlock;
            pool_window(a0, a1, a2, a3, out + o, am + o);
        }
    }
}

// One image, one block: adds the block's weight (kTaps x 16) and bias (16) gradients into acc.
__attribute__((target("avx512f"))) void backward_block(const float* x, int pw, const float* dp, const float* pooled,
                                                       const std::uint8_t* am, int oh_n, int ow_n, float* acc) {
    __m512 g[kTaps];
    for (int t = 0; t < kTaps; ++t) g[t] = _mm512_loadu_ps(acc + t * kBlock);
    __m512 gb = _mm512_loadu_ps(acc + kTaps * kBlock);
    const __m512 zero = _mm512_setzero_ps();
    for (int oh = 0; oh < oh_n; ++oh) {
        for (int ow = 0; ow < ow_n; ++ow) {
            const int o = (oh * ow_n + ow) * kBlock;
            const __mmask16 live = _mm512_cmp_ps_mask(_mm512_loadu_ps(pooled + o), zero, _CMP_GT_OQ);
            if (live == 0) continue;
            const __m512 d = _mm512_maskz_mov_ps(live, _mm512_loadu_ps(dp + o));
            gb = _mm512_add_ps(gb, d);
            const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(am + o)));
            for (int q = 0; q < 4; ++q) {
                const __mmask16 kq = live & _mm512_cmpeq_epi32_mask(idx, _mm512_set1_epi32(q));
                if (kq == 0) continue;
                const __m512 dq = _mm512_maskz_mov_ps(kq, d);
                const float* p = x + (2 * oh + q / 2) * pw + 2 * ow + q % 2;
                for (int kh = 0; kh < kK; ++kh) {
                    for (int kw = 0; kw < kK; ++kw) {
                        g[kh * kK + kw] = _mm512_fmadd_ps(_mm512_set1_ps(p[kh * pw + kw]), dq, g[kh * kK + kw]);
                    }
                }
            }
        }
    }
    for (int t = 0; t < kTaps; ++t) _mm512_storeu_ps(acc + t * kBlock, g[t]);
    _mm512_storeu_ps(acc + kTaps * kBlock, gb);
}

}  // namespace

int FusedConv1Pool::block_for(int channels) { return channel_block(channels); }

bool FusedConv1Pool::supported(int height, int width, int channels, int kernel) {
    return block_for(channels) != 0 && kernel == kK && height > 0 && width > 0 && height % 2 == 0 && width % 2 == 0;
}

FusedConv1Pool::FusedConv1Pool(int batch, int height, int width, int channels, int kernel)
    : batch_(batch),
      height_(height),
      width_(width),
      channels_(channels),
      kernel_(kernel),
      block_(block_for(channels)),
      padded_height_(height + kernel - 1),
      padded_width_(width + kernel - 1) {
    assert(supported(height, width, channels, kernel) && batch >= 1);
    padded_.assign(static_cast<std::size_t>(batch) * padded_height_ * padded_width_, 0.0f);
    weights_t_.assign(static_cast<std::size_t>(channels) * kTaps, 0.0f);
    argmax_.assign(static_cast<std::size_t>(batch) * channels * (height / 2) * (width / 2), 0);
    accumulators_.assign(
        static_cast<std::size_t>(std::max(1, omp_get_max_threads())) * (channels / block_) * (kTaps + 1) * block_,
        0.0f);
}

void FusedConv1Pool::forward(const float* input, const float* weights, const float* bias, float* pooled) {
    const int blk = block_, blocks = channels_ / blk, pad = kernel_ / 2;
    const int oh_n = height_ / 2, ow_n = width_ / 2;
    const std::size_t image = static_cast<std::size_t>(padded_height_) * padded_width_;
    const std::size_t out_block = static_cast<std::size_t>(oh_n) * ow_n * blk;
    for (int c = 0; c < channels_; ++c) {
        for (int t = 0; t < kTaps; ++t) {
            weights_t_[(static_cast<std::size_t>(c / blk) * kTaps + t) * blk + c % blk] =
                weights[static_cast<std::size_t>(c) * kTaps + t];
        }
    }
    using Forward = void (*)(const float*, int, const float*, const float*, int, int, float*, std::uint8_t*);
    const Forward block_forward = blk == kBlock ? Forward{forward_block} : avx2::conv1_pool_forward;
#pragma omp parallel for schedule(static)
    for (int n = 0; n < batch_; ++n) {
        float* dst = padded_.data() + n * image + pad * padded_width_ + pad;
        const float* src = input + static_cast<std::size_t>(n) * height_ * width_;
        for (int r = 0; r < height_; ++r) {
            std::memcpy(dst + r * padded_width_, src + r * width_, sizeof(float) * width_);
        }
    }
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < batch_; ++n) {
        for (int cb = 0; cb < blocks; ++cb) {
            const std::size_t o = (static_cast<std::size_t>(n) * blocks + cb) * out_block;
            block_forward(padded_.data() + n * image, padded_width_,
                          weights_t_.data() + static_cast<std::size_t>(cb) * kTaps * blk, bias + cb * blk, oh_n, ow_n,
                          pooled + o, argmax_.data() + o);
        }
    }
}

void FusedConv1Pool::backward(const float* d_pooled, const float* pooled, float* d_weights, float* d_bias) {
    const int blk = block_, blocks = channels_ / blk;
    const int oh_n = height_ / 2, ow_n = width_ / 2;
    const std::size_t image = static_cast<std::size_t>(padded_height_) * padded_width_;
    const std::size_t out_block = static_cast<std::size_t>(oh_n) * ow_n * blk;
    const std::size_t per_thread = static_cast<std::size_t>(blocks) * (kTaps + 1) * blk;
    using Backward = void (*)(const float*, int, const float*, const float*, const std::uint8_t*, int, int, float*);
    const Backward block_backward = blk == kBlock ? Backward{backward_block} : avx2::conv1_pool_backward;
    const int threads = std::max(1, omp_get_max_threads());
    if (accumulators_.size() < threads * per_thread) accumulators_.resize(threads * per_thread);
    std::fill(accumulators_.begin(), accumulators_.begin() + threads * per_thread, 0.0f);
#pragma omp parallel num_threads(threads)
    {
        float* acc = accumulators_.data() + omp_get_thread_num() * per_thread;
#pragma omp for schedule(static)
        for (int n = 0; n < batch_; ++n) {
            for (int cb = 0; cb < blocks; ++cb) {
                const std::size_t o = (static_cast<std::size_t>(n) * blocks + cb) * out_block;
                block_backward(padded_.data() + n * image, padded_width_, d_pooled + o, pooled + o, argmax_.data() + o,
                               oh_n, ow_n, acc + static_cast<std::size_t>(cb) * (kTaps + 1) * blk);
            }
        }
    }
    for (int c = 0; c < channels_; ++c) {
        const std::size_t base =
            static_cast<std::size_t>(c / blk) * (kTaps + 1) * blk + static_cast<std::size_t>(c % blk);
        for (int t = 0; t <= kTaps; ++t) {
            double sum = 0;
            for (int th = 0; th < threads; ++th) {
                sum += accumulators_[th * per_thread + base + static_cast<std::size_t>(t) * blk];
            }
            if (t < kTaps) {
                d_weights[static_cast<std::size_t>(c) * kTaps + t] = static_cast<float>(sum);
            } else {
                d_bias[c] = static_cast<float>(sum);
            }
        }
    }
}

}  // namespace psrun::nn::kernels
