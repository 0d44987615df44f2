#include "workerd/nn/kernels/depthwise_weights_grad.h"

#include <omp.h>

#include <algorithm>
#include <stdexcept>

namespace psrun::nn::kernels {

namespace {

// One (example, channel block): taps[(kh * KW + kw) * L + l] += dy * x over the output
// positions, bias[l] += dy. L lanes side by side (a fixed count: the compiler vectorizes it).
template <int L>
void accumulate_block(const DepthwiseShape& s, const float* x, const float* dy, float* taps, float* bias) {
    for (std::int64_t oh = 0; oh < s.oh; ++oh) {
        for (std::int64_t ow = 0; ow < s.ow; ++ow) {
            const float* d = dy + (oh * s.ow + ow) * L;
            for (int l = 0; l < L; ++l) bias[l] += d[l];
            for (std::int64_t kh = 0; kh < s.kh; ++kh) {
                const std::int64_t ih = oh * s.sh - s.pt + kh;
                if (ih < 0 || ih >= s.ih) continue;
                for (std::int64_t kw = 0; kw < s.kw; ++kw) {
                    const std::int64_t iw = ow * s.sw - s.pl + kw;
                    if (iw < 0 || iw >= s.iw) continue;
                    const float* v = x + (ih * s.iw + iw) * L;
                    float* t = taps + (kh * s.kw + kw) * L;
                    for (int l = 0; l < L; ++l) t[l] += d[l] * v[l];
                }
            }
        }
    }
}

}  // namespace

DepthwiseWeightsGrad::DepthwiseWeightsGrad(const DepthwiseShape& shape) : s_(shape) {
    if (s_.lanes != 8 && s_.lanes != 16) throw std::invalid_argument("depthwise weights grad: lanes must be 8 or 16");
    for (const auto v : {s_.n, s_.c, s_.ih, s_.iw, s_.oh, s_.ow, s_.kh, s_.kw, s_.sh, s_.sw})
        if (v < 1) throw std::invalid_argument("depthwise weights grad: sizes must be >= 1");
    blocks_ = (s_.c + s_.lanes - 1) / s_.lanes;
}

void DepthwiseWeightsGrad::accumulate(const float* src, const float* diff_dst, std::int64_t item, float* taps,
                                      float* bias) const {
    const std::int64_t plane = item;  // example * blocks + block: the order of both layouts
    const float* x = src + plane * s_.ih * s_.iw * s_.lanes;
    const float* dy = diff_dst + plane * s_.oh * s_.ow * s_.lanes;
    if (s_.lanes == 8) accumulate_block<8>(s_, x, dy, taps, bias);
    else accumulate_block<16>(s_, x, dy, taps, bias);
}

void DepthwiseWeightsGrad::run(const float* src, const float* diff_dst, float* dw, float* db) {
    const std::int64_t items = s_.n * blocks_;
    const std::int64_t taps = s_.kh * s_.kw, per_block = (taps + 1) * s_.lanes;
    const auto per_thread = static_cast<std::size_t>(blocks_ * per_block);
    const int threads = static_cast<int>(std::min<std::int64_t>(std::max(1, omp_get_max_threads()), items));
    partial_.assign(static_cast<std::size_t>(threads) * per_thread, 0.0);
#pragma omp parallel num_threads(threads)
    {
        const std::int64_t t = omp_get_thread_num(), share = omp_get_num_threads();
        std::vector<float> local(static_cast<std::size_t>(per_block));
        double* mine = partial_.data() + static_cast<std::size_t>(t) * per_thread;
        for (std::int64_t item = items * t / share; item < items * (t + 1) / share; ++item) {
            std::fill(local.begin(), local.end(), 0.0f);
            accumulate(src, diff_dst, item, local.data(), local.data() + taps * s_.lanes);
            double* sums = mine + (item % blocks_) * per_block;
            for (std::int64_t k = 0; k < per_block; ++k) sums[k] += local[static_cast<std::size_t>(k)];
        }
    }
    // dw[c, 0, kh, kw] and db[c]: channel c = block * lanes + lane, the padding lanes dropped.
    for (std::int64_t c = 0; c < s_.c; ++c) {
        const std::int64_t block = c / s_.lanes, lane = c % s_.lanes;
        for (std::int64_t k = 0; k <= taps; ++k) {
            if (k == taps && db == nullptr) break;
            double sum = 0;
            for (int t = 0; t < threads; ++t)
                sum += partial_[static_cast<std::size_t>(t) * per_thread +
                                static_cast<std::size_t>(block * per_block + k * s_.lanes + lane)];
            (k == taps ? db[c] : dw[c * taps + k]) = static_cast<float>(sum);
        }
    }
}

}  // namespace psrun::nn::kernels
