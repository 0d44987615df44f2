// The hand kernels that run on any x86-64 (workerd/nn/kernels/) against double loops over every
// element: BroadcastSum (the backward sum over broadcast axes: each pattern of kept and summed
// axes up to rank 4, with and without the product factor, one and two threads, the determinism
// it promises) and DepthwiseWeightsGrad (strides, pads, kernel sizes, 8 and 16 lanes, channels
// that do not fill the last block).
#include <omp.h>

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "workerd/nn/kernels/broadcast_sum.h"
#include "workerd/nn/kernels/depthwise_weights_grad.h"

namespace portable_kernels_test {

namespace {

using psrun::nn::kernels::BroadcastSum;
using psrun::nn::kernels::DepthwiseShape;
using psrun::nn::kernels::DepthwiseWeightsGrad;
using Dims = std::vector<std::int64_t>;

// The larger of worst and e, NaN once either is (an output never written stays NaN).
double worse(double worst, double e) { return std::isnan(worst) ? worst : std::isnan(e) || e > worst ? e : worst; }

std::int64_t count(const Dims& d) {
    std::int64_t n = 1;
    for (const auto x : d) n *= x;
    return n;
}

// out[j] = scale * sum of a[i] (* b[i]) over the elements i that broadcast to j.
std::vector<double> reference(const Dims& from, const Dims& to, const std::vector<float>& a, const float* b,
                              float scale) {
    std::vector<double> out(static_cast<std::size_t>(count(to)), 0.0);
    const std::size_t rank = from.size();
    for (std::int64_t i = 0; i < count(from); ++i) {
        std::int64_t rest = i, j = 0, stride = 1;
        for (std::size_t d = rank; d-- > 0;) {
            const std::int64_t coord = rest % from[d];
            rest /= from[d];
            if (to[d] != 1) j += coord * stride;
            stride *= to[d];
        }
        const auto k = static_cast<std::size_t>(i);
        out[static_cast<std::size_t>(j)] += static_cast<double>(a[k]) * (b ? b[k] : 1.0f);
    }
    for (auto& x : out) x *= scale;
    return out;
}

}  // namespace

TEST_CASE("broadcast sum: every kept/summed pattern against a double loop", "[nn][broadcast_sum]") {
    const Dims from =
        GENERATE(Dims{7}, Dims{5, 6}, Dims{3, 4, 5}, Dims{2, 3, 1, 4}, Dims{16, 7, 7, 40}, Dims{64, 9, 65});
    const int threads = GENERATE(1, 2);
    std::mt19937 rng(static_cast<unsigned>(count(from)));
    std::uniform_real_distribution<float> u(-1.0f, 1.0f);
    std::vector<float> a(static_cast<std::size_t>(count(from))), b(a.size());
    for (auto& x : a) x = u(rng);
    for (auto& x : b) x = u(rng);
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    // Every subset of axes summed (bit d set: axis d broadcasts, to[d] = 1).
    for (unsigned mask = 0; mask < (1u << from.size()); ++mask) {
        Dims to = from;
        for (std::size_t d = 0; d < from.size(); ++d)
            if (mask & (1u << d)) to[d] = 1;
        for (const bool product : {false, true}) {
            const float scale = product ? -1.0f : 0.5f;
            BroadcastSum sum(from, to);
            std::vector<float> out(static_cast<std::size_t>(count(to)), NAN);
            sum.run(a.data(), product ? b.data() : nullptr, out.data(), scale);
            const auto want = reference(from, to, a, product ? b.data() : nullptr, scale);
            INFO("rank " << from.size() << " mask " << mask << " product " << product << " threads " << threads);
            double worst = 0;  // relative to 1 + |want|; NaN (an output never written) stays NaN
            for (std::size_t j = 0; j < out.size(); ++j) {
                const double e = std::abs(out[j] - want[j]) / (1 + std::abs(want[j]));
                worst = worse(worst, e);
            }
            CHECK(worst <= 1e-6);
        }
    }
    omp_set_num_threads(saved);
}

TEST_CASE("broadcast sum: same bits on every run at one thread count; bad dims refused", "[nn][broadcast_sum]") {
    const Dims from{128, 7, 7, 64}, to{1, 1, 1, 64};
    std::vector<float> a(static_cast<std::size_t>(count(from)));
    for (std::size_t i = 0; i < a.size(); ++i) a[i] = std::sin(0.37f * static_cast<float>(i));
    BroadcastSum sum(from, to);
    std::vector<float> first(64), again(64);
    sum.run(a.data(), nullptr, first.data(), 1.0f);
    sum.run(a.data(), nullptr, again.data(), 1.0f);
    CHECK(first == again);
    CHECK_THROWS_AS(BroadcastSum(Dims{2, 3}, Dims{2}), std::invalid_argument);
    CHECK_THROWS_AS(BroadcastSum(Dims{2, 3}, Dims{2, 2}), std::invalid_argument);
}

TEST_CASE("depthwise weight gradient: blocked layouts against a plain loop", "[nn][depthwise]") {
    // n, c, ih, iw, oh, ow, kh, kw, sh, sw, pt, pl, lanes
    const DepthwiseShape s =
        GENERATE(DepthwiseShape{3, 12, 7, 7, 7, 7, 7, 7, 1, 1, 3, 3, 8},   // ConvNeXt's, C % 8 != 0
                 DepthwiseShape{2, 16, 9, 6, 5, 3, 3, 3, 2, 2, 1, 1, 16},  // strided, MobileNet's
                 DepthwiseShape{5, 8, 6, 9, 2, 5, 5, 5, 1, 1, 0, 0, 8},    // no padding
                 DepthwiseShape{1, 3, 4, 4, 4, 4, 3, 3, 1, 1, 1, 1, 16});  // one block, mostly padding
    const int threads = GENERATE(1, 2);
    const std::int64_t blocks = (s.c + s.lanes - 1) / s.lanes;
    // Blocked buffers; padding lanes hold a large value that must not reach a channel's sums.
    auto blocked = [&](std::int64_t h, std::int64_t w, unsigned seed) {
        std::vector<float> v(static_cast<std::size_t>(s.n * blocks * h * w * s.lanes));
        std::mt19937 rng(seed);
        std::uniform_real_distribution<float> u(-1.0f, 1.0f);
        for (std::size_t i = 0; i < v.size(); ++i) {
            const auto lane = static_cast<std::int64_t>(i) % s.lanes;
            const auto block = static_cast<std::int64_t>(i) / (h * w * s.lanes) % blocks;
            v[i] = block * s.lanes + lane < s.c ? u(rng) : 1e30f;
        }
        return v;
    };
    const auto x = blocked(s.ih, s.iw, 1), dy = blocked(s.oh, s.ow, 2);
    auto at = [&](const std::vector<float>& v, std::int64_t h, std::int64_t w, std::int64_t n, std::int64_t c,
                  std::int64_t y, std::int64_t z) {
        return static_cast<double>(
            v[static_cast<std::size_t>((((n * blocks + c / s.lanes) * h + y) * w + z) * s.lanes + c % s.lanes)]);
    };
    std::vector<double> want_w(static_cast<std::size_t>(s.c * s.kh * s.kw), 0.0),
        want_b(static_cast<std::size_t>(s.c), 0.0);
    for (std::int64_t n = 0; n < s.n; ++n)
        for (std::int64_t c = 0; c < s.c; ++c)
            for (std::int64_t oh = 0; oh < s.oh; ++oh)
                for (std::int64_t ow = 0; ow < s.ow; ++ow) {
                    const double d = at(dy, s.oh, s.ow, n, c, oh, ow);
                    want_b[static_cast<std::size_t>(c)] += d;
                    for (std::int64_t kh = 0; kh < s.kh; ++kh)
                        for (std::int64_t kw = 0; kw < s.kw; ++kw) {
                            const std::int64_t ih = oh * s.sh - s.pt + kh, iw = ow * s.sw - s.pl + kw;
                            if (ih >= 0 && ih < s.ih && iw >= 0 && iw < s.iw)
                                want_w[static_cast<std::size_t>((c * s.kh + kh) * s.kw + kw)] +=
                                    d * at(x, s.ih, s.iw, n, c, ih, iw);
                        }
                }
    const int saved = omp_get_max_threads();
    omp_set_num_threads(threads);
    DepthwiseWeightsGrad grad(s);
    std::vector<float> dw(want_w.size(), NAN), db(want_b.size(), NAN);
    grad.run(x.data(), dy.data(), dw.data(), db.data());
    omp_set_num_threads(saved);
    double worst = 0;
    for (std::size_t i = 0; i < dw.size(); ++i)
        worst = worse(worst, std::abs(dw[i] - want_w[i]) / (1 + std::abs(want_w[i])));
    for (std::size_t i = 0; i < db.size(); ++i)
        worst = worse(worst, std::abs(db[i] - want_b[i]) / (1 + std::abs(want_b[i])));
    INFO("c " << s.c << " lanes " << s.lanes << " threads " << threads);
    CHECK(worst <= 1e-5);
    CHECK_THROWS_AS(DepthwiseWeightsGrad(DepthwiseShape{1, 8, 3, 3, 3, 3, 3, 3, 1, 1, 1, 1, 4}), std::invalid_argument);
}

}  // namespace portable_kernels_test
