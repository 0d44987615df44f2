// The hand-written kernels (workerd/nn/kernels/conv1_pool.h, max_pool.h) called directly, against
// naive loops, on shapes mnist_deep never uses: odd pooled widths (the kernels' remainder paths),
// tied and all-negative windows, one and two threads, in the channel blocks of this CPU and ISA
// cap: 16 (AVX-512) where it allows AVX-512, else 8 (AVX2 + FMA), which an AVX-512 host runs in the
// suite's capped run (ONEDNN_MAX_CPU_ISA=AVX2, test/meson.build); channels a multiple of 8 but not
// of 16 only there.
#include <catch2/catch.hpp>

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "common/rng.h"
#include "workerd/nn/kernels/conv1_pool.h"
#include "workerd/nn/kernels/max_pool.h"

namespace psrun::nn::kernels {
namespace {

std::vector<float> random_values(std::size_t n, std::uint64_t seed, double lo, double hi) {
    psrun::Rng rng(seed);
    std::vector<float> v(n);
    for (auto& x : v) x = static_cast<float>(lo + (hi - lo) * rng.uniform());
    return v;
}

// Index of element (n, c, y, x) of an nChw<b>c tensor with C channels and h x w positions.
std::size_t blocked(int n, int c, int y, int x, int channels, int h, int w, int b) {
    return ((((static_cast<std::size_t>(n) * (channels / b) + c / b) * h + y) * w + x) * b) +
           static_cast<std::size_t>(c % b);
}

struct PoolResult {
    std::vector<float> out;   // nChw<b>c
    std::vector<int> argmax;  // 0..3 per output
};

// Naive 2x2/2 max-pool of a function value(n, c, y, x), first maximum wins, then ReLU.
template <typename F>
PoolResult naive_pool(F value, int batch, int channels, int h, int w, int b) {
    PoolResult r;
    r.out.assign(static_cast<std::size_t>(batch) * channels * (h / 2) * (w / 2), 0.0f);
    r.argmax.assign(r.out.size(), 0);
    for (int n = 0; n < batch; ++n)
        for (int c = 0; c < channels; ++c)
            for (int y = 0; y < h / 2; ++y)
                for (int x = 0; x < w / 2; ++x) {
                    float best = value(n, c, 2 * y, 2 * x);
                    int at = 0;
                    for (int q = 1; q < 4; ++q) {
                        const float v = value(n, c, 2 * y + q / 2, 2 * x + q % 2);
                        if (v > best) {
                            best = v;
                            at = q;
                        }
                    }
                    const auto i = blocked(n, c, y, x, channels, h / 2, w / 2, b);
                    r.out[i] = std::max(best, 0.0f);
                    r.argmax[i] = at;
                }
    return r;
}

void check_conv1_pool(int batch, int h, int w, int channels, int threads) {
    INFO("batch " << batch << ", " << h << "x" << w << ", " << channels << " channels, " << threads << " threads");
    constexpr int k = 5, pad = 2;
    const auto input = random_values(static_cast<std::size_t>(batch) * h * w, 1, 0.0, 1.0);
    const auto weights = random_values(static_cast<std::size_t>(channels) * k * k, 2, -0.2, 0.2);
    const auto bias = random_values(static_cast<std::size_t>(channels), 3, -0.3, 0.1);
    auto conv = [&](int n, int c, int y, int x) {
        double s = bias[static_cast<std::size_t>(c)];
        for (int i = 0; i < k; ++i)
            for (int j = 0; j < k; ++j) {
                const int yy = y + i - pad, xx = x + j - pad;
                if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                s += double(input[(static_cast<std::size_t>(n) * h + yy) * w + xx]) *
                     weights[(static_cast<std::size_t>(c) * k + i) * k + j];
            }
        return static_cast<float>(s);
    };
    omp_set_num_threads(threads);
    FusedConv1Pool layer(batch, h, w, channels, k);
    const int b = layer.block();
    CHECK(b == FusedConv1Pool::block_for(channels));
    const PoolResult want = naive_pool(conv, batch, channels, h, w, b);

    std::vector<float> pooled(want.out.size());
    layer.forward(input.data(), weights.data(), bias.data(), pooled.data());
    for (std::size_t i = 0; i < pooled.size(); ++i) {
        REQUIRE(pooled[i] == Approx(want.out[i]).margin(1e-5));
    }

    // Backward: the pooled gradient goes to the window's argmax when the pooled value is > 0.
    const auto d_pooled = random_values(pooled.size(), 4, -1.0, 1.0);
    std::vector<double> d_w(weights.size(), 0.0), d_b(bias.size(), 0.0);
    for (int n = 0; n < batch; ++n)
        for (int c = 0; c < channels; ++c)
            for (int y = 0; y < h / 2; ++y)
                for (int x = 0; x < w / 2; ++x) {
                    const auto i = blocked(n, c, y, x, channels, h / 2, w / 2, b);
                    if (want.out[i] <= 0) continue;
                    const int oy = 2 * y + want.argmax[i] / 2, ox = 2 * x + want.argmax[i] % 2;
                    d_b[static_cast<std::size_t>(c)] += d_pooled[i];
                    for (int a = 0; a < k; ++a)
                        for (int e = 0; e < k; ++e) {
                            const int yy = oy + a - pad, xx = ox + e - pad;
                            if (yy < 0 || yy >= h || xx < 0 || xx >= w) continue;
                            d_w[(static_cast<std::size_t>(c) * k + a) * k + e] +=
                                double(d_pooled[i]) * input[(static_cast<std::size_t>(n) * h + yy) * w + xx];
                        }
                }
    std::vector<float> got_w(weights.size(), -1.0f), got_b(bias.size(), -1.0f);
    layer.backward(d_pooled.data(), pooled.data(), got_w.data(), got_b.data());
    for (std::size_t i = 0; i < got_w.size(); ++i) REQUIRE(got_w[i] == Approx(d_w[i]).margin(1e-4));
    for (std::size_t i = 0; i < got_b.size(); ++i) REQUIRE(got_b[i] == Approx(d_b[i]).margin(1e-4));
}

}  // namespace

TEST_CASE("fused conv1+ReLU+pool matches naive loops, odd widths included", "[nn_engine][kernels]") {
    if (!FusedConv1Pool::supported(28, 28, 32, 5)) {
        WARN("neither AVX-512 nor AVX2 + FMA on this CPU: the hand-written kernels are not used, nothing to test");
        return;
    }
    const bool blocks8 = FusedConv1Pool::block_for(32) == 8;  // AVX2 + FMA
    CHECK(FusedConv1Pool::block_for(24) == (blocks8 ? 8 : 0));
    CHECK_FALSE(FusedConv1Pool::supported(28, 28, 20, 5));  // channels not a multiple of 8
    CHECK_FALSE(FusedConv1Pool::supported(28, 28, 32, 3));  // kernel not 5
    CHECK_FALSE(FusedConv1Pool::supported(27, 28, 32, 5));  // odd height
    for (const int odd8 : {0, 1}) {  // channels a multiple of 16, or (8-channel blocks) only of 8
        if (odd8 && !blocks8) continue;
        const int c = odd8 ? 8 : 16;
        check_conv1_pool(3, 28, 28, 2 * c + (odd8 ? 8 : 0), 2);
        check_conv1_pool(2, 6, 10, c, 2);                       // pooled width 5: the single-window remainder
        check_conv1_pool(5, 4, 6, 3 * c + (odd8 ? 16 : 0), 1);  // pooled width 3, several blocks, one thread
    }
    omp_set_num_threads(2);
}

namespace {

void check_blocked_max_pool(int channels) {
    INFO(channels << " channels");
    const int batch = 3, h = 6, w = 10, b = BlockedMaxPool::block_for(channels);
    auto at = [b](int n, int c, int y, int x, int channels_, int h_, int w_) {
        return blocked(n, c, y, x, channels_, h_, w_, b);
    };
    auto src = random_values(static_cast<std::size_t>(batch) * channels * h * w, 7, -1.0, 1.0);
    // Channel 0 of image 0: a window of four equal positive values (the first wins) and a window
    // of negatives (output 0, no gradient).
    for (int q = 0; q < 4; ++q) {
        src[at(0, 0, q / 2, q % 2, channels, h, w)] = 0.5f;
        src[at(0, 0, q / 2, 2 + q % 2, channels, h, w)] = -0.25f - 0.1f * q;
    }
    auto value = [&](int n, int c, int y, int x) { return src[at(n, c, y, x, channels, h, w)]; };
    const PoolResult want = naive_pool(value, batch, channels, h, w, b);
    BlockedMaxPool pool(batch, channels, h, w);
    REQUIRE(pool.block() == b);
    std::vector<float> dst(want.out.size()), d_src(src.size(), 7.0f);  // 7: not written
    pool.forward(src.data(), dst.data());
    for (std::size_t i = 0; i < dst.size(); ++i) REQUIRE(dst[i] == want.out[i]);
    const auto d_dst = random_values(dst.size(), 8, -1.0, 1.0);
    pool.backward(d_dst.data(), dst.data(), d_src.data());
    for (int n = 0; n < batch; ++n)
        for (int c = 0; c < channels; ++c)
            for (int y = 0; y < h; ++y)
                for (int x = 0; x < w; ++x) {
                    const auto o = at(n, c, y / 2, x / 2, channels, h / 2, w / 2);
                    const bool is_max = want.argmax[o] == (y % 2) * 2 + x % 2;
                    const float expect = is_max && want.out[o] > 0 ? d_dst[o] : 0.0f;
                    REQUIRE(d_src[at(n, c, y, x, channels, h, w)] == expect);
                }
    CHECK(dst[at(0, 0, 0, 0, channels, h / 2, w / 2)] == 0.5f);
    CHECK(d_src[at(0, 0, 0, 0, channels, h, w)] == d_dst[at(0, 0, 0, 0, channels, h / 2, w / 2)]);
    CHECK(d_src[at(0, 0, 0, 1, channels, h, w)] == 0.0f);        // tie: only the first gets it
    CHECK(dst[at(0, 0, 0, 1, channels, h / 2, w / 2)] == 0.0f);  // all-negative window
}

}  // namespace

TEST_CASE("blocked max-pool: ties, negative windows, the fused ReLU backward", "[nn_engine][kernels]") {
    if (!BlockedMaxPool::supported(64, 14, 14)) {
        WARN("neither AVX-512 nor AVX2 + FMA on this CPU: the hand-written kernels are not used, nothing to test");
        return;
    }
    const bool blocks8 = BlockedMaxPool::block_for(32) == 8;  // AVX2 + FMA
    CHECK(BlockedMaxPool::block_for(40) == (blocks8 ? 8 : 0));
    CHECK_FALSE(BlockedMaxPool::supported(36, 14, 14));
    CHECK_FALSE(BlockedMaxPool::supported(64, 14, 13));
    check_blocked_max_pool(32);
    if (blocks8) check_blocked_max_pool(24);
}

}  // namespace psrun::nn::kernels
