#include "workerd/nn/kernels/max_pool.h"

#include <cassert>
#include <cstddef>

#include "workerd/nn/kernels/avx2_blocks.h"
#include "workerd/nn/kernels/channel_block.h"
#include "workerd/nn/kernels/pool_window.h"

namespace psrun::nn::kernels {

namespace {

// One image's block of 16 channels: h x w x 16 in, h/2 x w/2 x 16 out.
__attribute__((target("avx512f"))) void forward_block(const float* src, int h, int w, float* dst, std::uint8_t* am) {
    const int oh_n = h / 2, ow_n = w / 2;
    for (int oh = 0; oh < oh_n; ++oh) {
        const float* r0 = src + static_cast<std::ptrdiff_t>(2 * oh) * w * kBlock;
        const float* r1 = r0 + static_cast<std::ptrdiff_t>(w) * kBlock;
        for (int ow = 0; ow < ow_n; ++ow) {
            const int c = 2 * ow * kBlock, o = (oh * ow_n + ow) * kBlock;
            pool_window(_mm512_loadu_ps(r0 + c), _mm512_loadu_ps(r0 + c + kBlock), _mm512_loadu_ps(r1 + c),
                        _mm512_loadu_ps(r1 + c + kBlock), dst + o, am + o);
        }
    }
}

__attribute__((target("avx512f"))) void backward_block(const float* d_dst, const float* dst, const std::uint8_t* am,
                                                       int h, int w, float* d_src) {
    const int oh_n = h / 2, ow_n = w / 2;
    const __m512 zero = _mm512_setzero_ps();
    for (int oh = 0; oh < oh_n; ++oh) {
        float* r0 = d_src + static_cast<std::ptrdiff_t>(2 * oh) * w * kBlock;
        float* r1 = r0 + static_cast<std::ptrdiff_t>(w) * kBlock;
        for (int ow = 0; ow < ow_n; ++ow) {
            const int c = 2 * ow * kBlock, o = (oh * ow_n + ow) * kBlock;
            const __mmask16 live = _mm512_cmp_ps_mask(_mm512_loadu_ps(dst + o), zero, _CMP_GT_OQ);
            const __m512 g = _mm512_maskz_mov_ps(live, _mm512_loadu_ps(d_dst + o));
            const __m512i idx = _mm512_cvtepu8_epi32(_mm_loadu_si128(reinterpret_cast<const __m128i*>(am + o)));
            _mm512_storeu_ps(r0 + c, _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(idx, _mm512_set1_epi32(0)), g));
            _mm512_storeu_ps(r0 + c + kBlock,
                             _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(idx, _mm512_set1_epi32(1)), g));
            _mm512_storeu_ps(r1 + c, _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(idx, _mm512_set1_epi32(2)), g));
            _mm512_storeu_ps(r1 + c + kBlock,
                             _mm512_maskz_mov_ps(_mm512_cmpeq_epi32_mask(idx, _mm512_set1_epi32(3)), g));
        }
    }
}

}  // namespace

int BlockedMaxPool::block_for(int channels) { return channel_block(channels); }

bool BlockedMaxPool::supported(int channels, int height, int width) {
    return block_for(channels) != 0 && height > 0 && width > 0 && height % 2 == 0 && width % 2 == 0;
}

BlockedMaxPool::BlockedMaxPool(int batch, int channels, int height, int width)
    : batch_(batch),
      block_(block_for(channels)),
      blocks_(block_ ? channels / block_ : 0),
      height_(height),
      width_(width) {
    assert(supported(channels, height, width) && batch >= 1);
    argmax_.assign(static_cast<std::size_t>(batch) * channels * (height / 2) * (width / 2), 0);
}

void BlockedMaxPool::forward(const float* src, float* dst) {
    const std::size_t in_block = static_cast<std::size_t>(height_) * width_ * block_;
    const std::size_t out_block = in_block / 4;
    using Forward = void (*)(const float*, int, int, float*, std::uint8_t*);
    const Forward block_forward = block_ == kBlock ? Forward{forward_block} : avx2::max_pool_forward;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < batch_; ++n) {
        for (int cb = 0; cb < blocks_; ++cb) {
            const std::size_t b = static_cast<std::size_t>(n) * blocks_ + cb;
            block_forward(src + b * in_block, height_, width_, dst + b * out_block, argmax_.data() + b * out_block);
        }
    }
}

void BlockedMaxPool::backward(const float* d_dst, const float* dst, float* d_src) {
    const std::size_t in_block = static_cast<std::size_t>(height_) * width_ * block_;
    const std::size_t out_block = in_block / 4;
    using Backward = void (*)(const float*, const float*, const std::uint8_t*, int, int, float*);
    const Backward block_backward = block_ == kBlock ? Backward{backward_block} : avx2::max_pool_backward;
#pragma omp parallel for collapse(2) schedule(static)
    for (int n = 0; n < batch_; ++n) {
        for (int cb = 0; cb < blocks_; ++cb) {
            const std::size_t b = static_cast<std::size_t>(n) * blocks_ + cb;
            block_backward(d_dst + b * out_block, dst + b * out_block, argmax_.data() + b * out_block, height_, width_,
                           d_src + b * in_block);
        }
    }
}

}  // namespace psrun::nn::kernels
