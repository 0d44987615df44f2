#include "common/lamb.h"

#include <algorithm>
#include <cassert>
#include <cmath>

#include "common/optimizer.h"

namespace psrun {
namespace {

// Phase 1 works in tiles: an element-wise loop (vectorised) writes r for the tile into a stack
// buffer, then a loop sums squares into kLambLanes f64 accumulators (element i of the tile into lane
// i mod kLambLanes). Tiles start at multiples of kLambTile from the range's start, so a block's sums
// depend only on its floats.
constexpr std::size_t kLambTile = 256;
constexpr std::size_t kLambLanes = 8;
static_assert(kLambBlockFloats % kLambTile == 0);

// r of one float; phase 1 and phase 2 compute it with this one expression.
inline float lamb_direction(float m, float v, float p, float bc1, float bc2_sqrt, float eps, float wd) {
    return (m / bc1) / (std::sqrt(v) / bc2_sqrt + eps) + wd * p;
}

}  // namespace

float lamb_trust_ratio(const LambNorms& sums) {
    if (!(sums.params > 0.0) || !(sums.update > 0.0)) return 1.0f;
    const double ratio = std::sqrt(sums.params) / std::sqrt(sums.update);
    return std::isfinite(ratio) ? static_cast<float>(ratio) : 1.0f;
}

std::pair<std::size_t, std::size_t> lamb_block_range(std::size_t n, int part, int parts) {
    const std::size_t blocks = (n + kLambBlockFloats - 1) / kLambBlockFloats;
    const auto p = static_cast<std::size_t>(part), k = static_cast<std::size_t>(std::max(1, parts));
    return {std::min(n, blocks * p / k * kLambBlockFloats), std::min(n, blocks * (p + 1) / k * kLambBlockFloats)};
}

LambKernel::LambKernel(const OptimizerConfig& tensor, std::uint64_t t, bool decay)
    : lr_(tensor.rate_at(t) * tensor.lr_multiplier),
      beta1_(tensor.beta1),
      beta2_(tensor.beta2),
      epsilon_(tensor.epsilon),
      decay_(decay ? tensor.weight_decay : 0.0f) {
    // As timm computes them: Python floats (f64), then used on f32 tensors.
    const double td = static_cast<double>(t);
    bc1_ = static_cast<float>(1.0 - std::pow(double(beta1_), td));
    bc2_sqrt_ = static_cast<float>(std::sqrt(1.0 - std::pow(double(beta2_), td)));
}

LambNorms LambKernel::moments(const float* __restrict p, const float* __restrict g, float* __restrict m,
                              float* __restrict v, std::size_t n) const {
    const float b1 = beta1_, b2 = beta2_, eps = epsilon_, bc1 = bc1_, bc2 = bc2_sqrt_, wd = decay_;
    double sp[kLambLanes] = {}, sr[kLambLanes] = {};
    float r[kLambTile];
    for (std::size_t t0 = 0; t0 < n; t0 += kLambTile) {
        const std::size_t len = std::min(kLambTile, n - t0);
        const float* __restrict pt = p + t0;
        const float* __restrict gt = g + t0;
        float* __restrict mt = m + t0;
        float* __restrict vt = v + t0;
        for (std::size_t i = 0; i < len; ++i) {
            const float gi = gt[i];
            mt[i] = b1 * mt[i] + (1.0f - b1) * gi;
            vt[i] = b2 * vt[i] + (1.0f - b2) * gi * gi;
            r[i] = lamb_direction(mt[i], vt[i], pt[i], bc1, bc2, eps, wd);
        }
        std::size_t i = 0;
        for (; i + kLambLanes <= len; i += kLambLanes)
            for (std::size_t j = 0; j < kLambLanes; ++j) {
                const double a = pt[i + j], b = r[i + j];
                sp[j] += a * a;
                sr[j] += b * b;
            }
        for (; i < len; ++i) {
            const double a = pt[i], b = r[i];
            sp[i % kLambLanes] += a * a;
            sr[i % kLambLanes] += b * b;
        }
    }
    LambNorms out;
    for (std::size_t j = 0; j < kLambLanes; ++j) {
        out.params += sp[j];
        out.update += sr[j];
    }
    return out;
}

void LambKernel::step(float* __restrict p, const float* __restrict m, const float* __restrict v, std::size_t n,
                      float trust) const {
    const float bc1 = bc1_, bc2 = bc2_sqrt_, eps = epsilon_, wd = decay_, scale = lr_ * trust;
    for (std::size_t i = 0; i < n; ++i) p[i] -= scale * lamb_direction(m[i], v[i], p[i], bc1, bc2, eps, wd);
}

void LambKernel::whole(float* p, const float* g, float* m, float* v, std::size_t n) const {
    LambNorms total;
    for (std::size_t b = 0; b < n; b += kLambBlockFloats) {
        const LambNorms s = moments(p + b, g + b, m + b, v + b, std::min(kLambBlockFloats, n - b));
        total.params += s.params;
        total.update += s.update;
    }
    step(p, m, v, n, lamb_trust_ratio(total));
}

// Optimizer's two phases (declared in common/optimizer.h; here to keep the LAMB arithmetic in one file).

void Optimizer::lamb_moments(std::span<const float> params, std::span<const float> grads, std::size_t begin,
                             std::size_t end, bool decay) {
    assert(config_.kind == OptimizerKind::kLamb && params.size() == size_ && grads.size() == size_);
    assert(begin % kLambBlockFloats == 0 && (end % kLambBlockFloats == 0 || end == size_) && begin <= end);
    const LambKernel kernel(config_, updates_, decay);
    for (std::size_t b = begin; b < end; b += kLambBlockFloats) {
        const std::size_t e = std::min(end, b + kLambBlockFloats);
        lamb_blocks_[b / kLambBlockFloats] =
            kernel.moments(params.data() + b, grads.data() + b, slot0_.data() + b, slot1_.data() + b, e - b);
    }
}

float Optimizer::lamb_finish() {
    LambNorms total;
    for (const auto& s : lamb_blocks_) {
        total.params += s.params;
        total.update += s.update;
    }
    lamb_trust_ = lamb_trust_ratio(total);
    return lamb_trust_;
}

void Optimizer::lamb_step(std::span<float> params, std::size_t begin, std::size_t end, bool decay) {
    assert(config_.kind == OptimizerKind::kLamb && params.size() == size_ && begin <= end && end <= size_);
    LambKernel(config_, updates_, decay)
        .step(params.data() + begin, slot0_.data() + begin, slot1_.data() + begin, end - begin, lamb_trust_);
}

}  // namespace psrun
