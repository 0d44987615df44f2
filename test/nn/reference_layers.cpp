#include "test/nn/reference_layers.h"

#include <algorithm>

namespace psrun::nn::test {

namespace {

Dims in_dims(const LayerSpec& s, std::int64_t n) { return {n, s.input.channels, s.input.height, s.input.width}; }
Dims out_dims(const LayerSpec& s, std::int64_t n) { return {n, s.output.channels, s.output.height, s.output.width}; }

}  // namespace

// Convolution (cross-correlation) with TF pads: forward, and all three gradients.
RefResult conv_ref(const LayerSpec& s, std::int64_t n, const std::vector<float>& x, const std::vector<float>& p,
                 const std::vector<float>& dy, bool relu) {
    const Dims di = in_dims(s, n), dout = out_dims(s, n);
    const auto kh = s.kernel.h, kw = s.kernel.w, ci = di.c, co = dout.c;
    auto widx = [&](auto o, auto i, auto a, auto b) { return static_cast<std::size_t>(((o * ci + i) * kh + a) * kw + b); };
    const std::size_t wsize = static_cast<std::size_t>(co * ci * kh * kw);
    RefResult r{V(static_cast<std::size_t>(n * co * dout.h * dout.w)), V(x.size()), V(wsize), V(s.bias ? static_cast<std::size_t>(co) : 0)};
    for (int pass = 0; pass < 2; ++pass) {
        for (std::int64_t b = 0; b < n; ++b)
            for (std::int64_t o = 0; o < co; ++o)
                for (std::int64_t oy = 0; oy < dout.h; ++oy)
                    for (std::int64_t ox = 0; ox < dout.w; ++ox) {
                        const std::size_t yi = dout.at(b, o, oy, ox);
                        double g = 0;
                        if (pass == 1) {
                            g = dy[yi] * (relu && r.y[yi] <= 0 ? 0.0 : 1.0);
                            if (s.bias) r.db[static_cast<std::size_t>(o)] += g;
                        }
                        double acc = s.bias ? p[wsize + static_cast<std::size_t>(o)] : 0.0;
                        for (std::int64_t i = 0; i < ci; ++i)
                            for (std::int64_t a = 0; a < kh; ++a)
                                for (std::int64_t c = 0; c < kw; ++c) {
                                    const auto iy = oy * s.stride.h - s.pads.top + a;
                                    const auto ix = ox * s.stride.w - s.pads.left + c;
                                    if (iy < 0 || iy >= di.h || ix < 0 || ix >= di.w) continue;
                                    const auto xi = di.at(b, i, iy, ix);
                                    if (pass == 0) {
                                        acc += x[xi] * p[widx(o, i, a, c)];
                                    } else {
                                        r.dw[widx(o, i, a, c)] += g * x[xi];
                                        r.dx[xi] += g * p[widx(o, i, a, c)];
                                    }
                                }
                        if (pass == 0) r.y[yi] = relu ? std::max(acc, 0.0) : acc;
                    }
    }
    return r;
}

// Pooling with TF pads: max ignores the padding, avg divides by the elements inside.
std::pair<V, V> pool_ref(const LayerSpec& s, std::int64_t n, const std::vector<float>& x, const std::vector<float>& dy) {
    const Dims di = in_dims(s, n), dout = out_dims(s, n);
    V y(static_cast<std::size_t>(n * dout.c * dout.h * dout.w)), dx(x.size());
    for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t c = 0; c < di.c; ++c)
            for (std::int64_t oy = 0; oy < dout.h; ++oy)
                for (std::int64_t ox = 0; ox < dout.w; ++ox) {
                    std::vector<std::size_t> window;
                    for (std::int64_t a = 0; a < s.kernel.h; ++a)
                        for (std::int64_t e = 0; e < s.kernel.w; ++e) {
                            const auto iy = oy * s.stride.h - s.pads.top + a, ix = ox * s.stride.w - s.pads.left + e;
                            if (iy >= 0 && iy < di.h && ix >= 0 && ix < di.w) window.push_back(di.at(b, c, iy, ix));
                        }
                    const auto yi = dout.at(b, c, oy, ox);
                    if (s.kind == LayerKind::kMaxPool) {
                        std::size_t best = window.front();
                        for (auto i : window) best = x[i] > x[best] ? i : best;
                        y[yi] = x[best];
                        dx[best] += dy[yi];
                    } else {
                        double sum = 0;
                        for (auto i : window) sum += x[i];
                        y[yi] = sum / static_cast<double>(window.size());
                        for (auto i : window) dx[i] += dy[yi] / static_cast<double>(window.size());
                    }
                }
    return {y, dx};
}

// Dense on an NCHW input flattened in NHWC order.
RefResult dense_ref(const LayerSpec& s, std::int64_t n, const std::vector<float>& x, const std::vector<float>& p,
                  const std::vector<float>& dy, bool relu) {
    const Dims di = in_dims(s, n);
    const auto fin = static_cast<std::size_t>(s.input.elements()), units = static_cast<std::size_t>(s.units);
    RefResult r{V(static_cast<std::size_t>(n) * units), V(x.size()), V(units * fin), V(s.bias ? units : 0)};
    for (std::int64_t b = 0; b < n; ++b) {
        // NCHW index of each NHWC feature.
        std::vector<std::size_t> src(fin);
        for (std::int64_t yy = 0; yy < di.h; ++yy)
            for (std::int64_t xx = 0; xx < di.w; ++xx)
                for (std::int64_t c = 0; c < di.c; ++c)
                    src[static_cast<std::size_t>((yy * di.w + xx) * di.c + c)] = di.at(b, c, yy, xx);
        for (std::size_t u = 0; u < units; ++u) {
            double acc = s.bias ? p[units * fin + u] : 0.0;
            for (std::size_t i = 0; i < fin; ++i) acc += p[u * fin + i] * x[src[i]];
            const auto yi = static_cast<std::size_t>(b) * units + u;
            r.y[yi] = relu ? std::max(acc, 0.0) : acc;
            const double g = dy[yi] * (relu && acc <= 0 ? 0.0 : 1.0);
            if (s.bias) r.db[u] += g;
            for (std::size_t i = 0; i < fin; ++i) {
                r.dw[u * fin + i] += g * x[src[i]];
                r.dx[src[i]] += g * p[u * fin + i];
            }
        }
    }
    return r;
}

}  // namespace psrun::nn::test
