#include "test/nn/reference_layers.h"

#include <algorithm>

#include "workerd/nn/ops/conv.h"
#include "workerd/nn/ops/pool.h"

namespace psrun::nn::test {

namespace {

Shape4 shape4(const ValueInfo& v, std::int64_t n) {
    if (v.rank() == 2) return {n, v.dims[1].value, 1, 1};
    return {n, v.dims[1].value, v.dims[2].value, v.dims[3].value};
}

}  // namespace

// Convolution (cross-correlation) with TF pads: forward, and all three gradients.
RefResult conv_ref(const Node& node, const ValueInfo& in, std::int64_t n, const std::vector<float>& x,
                   const std::vector<float>& p, const std::vector<float>& dy, bool relu) {
    const ConvGeometry geo = *conv_geometry(node.attrs, in);
    const Window2d& win = geo.window;
    const Shape4 di = shape4(in, n), dout{n, geo.filters, win.oh, win.ow};
    const auto kh = win.kh, kw = win.kw, ci = di.c / geo.groups, co = dout.c, per_group = co / geo.groups;
    const bool bias = geo.bias;
    auto widx = [&](auto o, auto i, auto a, auto b) {
        return static_cast<std::size_t>(((o * ci + i) * kh + a) * kw + b);
    };
    const std::size_t wsize = static_cast<std::size_t>(co * ci * kh * kw);
    RefResult r{V(static_cast<std::size_t>(n * co * dout.h * dout.w)), V(x.size()), V(wsize),
                V(bias ? static_cast<std::size_t>(co) : 0)};
    for (int pass = 0; pass < 2; ++pass) {
        for (std::int64_t b = 0; b < n; ++b)
            for (std::int64_t o = 0; o < co; ++o)
                for (std::int64_t oy = 0; oy < dout.h; ++oy)
                    for (std::int64_t ox = 0; ox < dout.w; ++ox) {
                        const std::size_t yi = dout.at(b, o, oy, ox);
                        double g = 0;
                        if (pass == 1) {
                            g = dy[yi] * (relu && r.y[yi] <= 0 ? 0.0 : 1.0);
                            if (bias) r.db[static_cast<std::size_t>(o)] += g;
                        }
                        double acc = bias ? p[wsize + static_cast<std::size_t>(o)] : 0.0;
                        const std::int64_t g0 = (o / per_group) * ci;
                        for (std::int64_t i = 0; i < ci; ++i)
                            for (std::int64_t a = 0; a < kh; ++a)
                                for (std::int64_t c = 0; c < kw; ++c) {
                                    const auto iy = oy * win.sh - win.pt + a * win.dh;
                                    const auto ix = ox * win.sw - win.pl + c * win.dw;
                                    if (iy < 0 || iy >= di.h || ix < 0 || ix >= di.w) continue;
                                    const auto xi = di.at(b, g0 + i, iy, ix);
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
std::pair<V, V> pool_ref(const Node& node, const ValueInfo& in, std::int64_t n, const std::vector<float>& x,
                         const std::vector<float>& dy) {
    const PoolGeometry geo = *pool_geometry(node, in);
    const Window2d& win = geo.window;
    const Shape4 di = shape4(in, n), dout{n, di.c, win.oh, win.ow};
    V y(static_cast<std::size_t>(n * dout.c * dout.h * dout.w)), dx(x.size());
    for (std::int64_t b = 0; b < n; ++b)
        for (std::int64_t c = 0; c < di.c; ++c)
            for (std::int64_t oy = 0; oy < dout.h; ++oy)
                for (std::int64_t ox = 0; ox < dout.w; ++ox) {
                    std::vector<std::size_t> window;
                    std::int64_t cells = 0;
                    for (std::int64_t a = 0; a < win.kh; ++a)
                        for (std::int64_t e = 0; e < win.kw; ++e) {
                            const auto iy = oy * win.sh - win.pt + a * win.dh, ix = ox * win.sw - win.pl + e * win.dw;
                            if (iy < di.h + win.pb && ix < di.w + win.pr) ++cells;
                            if (iy >= 0 && iy < di.h && ix >= 0 && ix < di.w) window.push_back(di.at(b, c, iy, ix));
                        }
                    const auto yi = dout.at(b, c, oy, ox);
                    if (geo.max) {
                        std::size_t best = window.front();
                        for (auto i : window) best = x[i] > x[best] ? i : best;
                        y[yi] = x[best];
                        dx[best] += dy[yi];
                    } else {
                        double sum = 0;
                        for (auto i : window) sum += x[i];
                        const double count = static_cast<double>(
                            geo.count_include_pad ? cells : static_cast<std::int64_t>(window.size()));
                        y[yi] = sum / count;
                        for (auto i : window) dx[i] += dy[yi] / count;
                    }
                }
    return {y, dx};
}

// Dense on an NCHW input flattened in NHWC order.
RefResult dense_ref(const Node& node, const ValueInfo& in, std::int64_t n, const std::vector<float>& x,
                    const std::vector<float>& p, const std::vector<float>& dy, bool relu) {
    const Shape4 di = shape4(in, n);
    const bool bias = node.attrs.at("bias").get<bool>();
    const auto fin = static_cast<std::size_t>(di.c * di.h * di.w), units = node.attrs.at("units").get<std::size_t>();
    RefResult r{V(static_cast<std::size_t>(n) * units), V(x.size()), V(units * fin), V(bias ? units : 0)};
    for (std::int64_t b = 0; b < n; ++b) {
        // NCHW index of each NHWC feature.
        std::vector<std::size_t> src(fin);
        for (std::int64_t yy = 0; yy < di.h; ++yy)
            for (std::int64_t xx = 0; xx < di.w; ++xx)
                for (std::int64_t c = 0; c < di.c; ++c)
                    src[static_cast<std::size_t>((yy * di.w + xx) * di.c + c)] = di.at(b, c, yy, xx);
        for (std::size_t u = 0; u < units; ++u) {
            double acc = bias ? p[units * fin + u] : 0.0;
            for (std::size_t i = 0; i < fin; ++i) acc += p[u * fin + i] * x[src[i]];
            const auto yi = static_cast<std::size_t>(b) * units + u;
            r.y[yi] = relu ? std::max(acc, 0.0) : acc;
            const double g = dy[yi] * (relu && acc <= 0 ? 0.0 : 1.0);
            if (bias) r.db[u] += g;
            for (std::size_t i = 0; i < fin; ++i) {
                r.dw[u * fin + i] += g * x[src[i]];
                r.dx[src[i]] += g * p[u * fin + i];
            }
        }
    }
    return r;
}

}  // namespace psrun::nn::test
