// Naive reference implementation of mnist_deep's layout (plain loops, double precision) for the
// engine's whole-model tests: forward activations in NCHW / NC and parameter gradients in the
// plain layouts of the flat parameter buffer (conv1/w, conv1/b, conv2/w, ..., fc2/b).
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "workerd/parameter_set.h"

namespace psrun::worker::test {

// Layer sizes of the mnist_deep layout; the defaults are the real model.
struct ModelShape {
    int height = 28;  // divisible by 4
    int width = 28;   // divisible by 4
    int kernel = 5;   // odd (SAME padding)
    int conv1_channels = 32;
    int conv2_channels = 64;
    int fc1_units = 1024;
    int classes = 10;
    int flat_features() const { return (height / 4) * (width / 4) * conv2_channels; }
};

struct Reference {
    // Activations, post-ReLU where the layer has one.
    std::vector<double> conv1, pool1, conv2, pool2, fc1, logits;
    double loss = 0;
    // Gradients in ParameterSet order (conv1/w ... fc2/b).
    std::vector<std::vector<double>> grads;
};

// Forward and backward of the model without dropout (keep_prob 1).
inline Reference reference_pass(const ModelShape& s, int n, const std::vector<float>& x,
                                const std::vector<std::int32_t>& labels, const ParameterSet& p) {
    const int h = s.height, w = s.width, k = s.kernel, pad = k / 2, c1 = s.conv1_channels, c2 = s.conv2_channels,
              f = s.fc1_units, z = s.classes, fin = s.flat_features();
    auto P = [&](int t) { return p.tensor(static_cast<std::size_t>(t)); };
    // conv SAME + bias + ReLU: in [n][ci][hh][ww], wt [co][ci][k][k].
    auto conv = [&](const std::vector<double>& in, int ci, int co, int hh, int ww, int wt, int bt) {
        std::vector<double> out(static_cast<std::size_t>(n) * co * hh * ww);
        for (int b = 0; b < n; ++b)
            for (int o = 0; o < co; ++o)
                for (int i = 0; i < hh; ++i)
                    for (int j = 0; j < ww; ++j) {
                        double acc = P(bt)[o];
                        for (int c = 0; c < ci; ++c)
                            for (int ki = 0; ki < k; ++ki)
                                for (int kj = 0; kj < k; ++kj) {
                                    const int y = i + ki - pad, xx = j + kj - pad;
                                    if (y < 0 || y >= hh || xx < 0 || xx >= ww) continue;
                                    acc +=
                                        in[((b * ci + c) * hh + y) * ww + xx] * P(wt)[((o * ci + c) * k + ki) * k + kj];
                                }
                        out[((b * co + o) * hh + i) * ww + j] = acc > 0 ? acc : 0;
                    }
        return out;
    };
    auto pool = [&](const std::vector<double>& in, int c, int hh, int ww, std::vector<int>& arg) {
        std::vector<double> out(static_cast<std::size_t>(n) * c * (hh / 2) * (ww / 2));
        arg.assign(out.size(), 0);
        for (int b = 0; b < n; ++b)
            for (int ch = 0; ch < c; ++ch)
                for (int i = 0; i < hh / 2; ++i)
                    for (int j = 0; j < ww / 2; ++j) {
                        int best = ((b * c + ch) * hh + 2 * i) * ww + 2 * j;
                        for (int di = 0; di < 2; ++di)
                            for (int dj = 0; dj < 2; ++dj) {
                                const int idx = ((b * c + ch) * hh + 2 * i + di) * ww + 2 * j + dj;
                                if (in[idx] > in[best]) best = idx;
                            }
                        const int o = ((b * c + ch) * (hh / 2) + i) * (ww / 2) + j;
                        out[o] = in[best];
                        arg[o] = best;
                    }
        return out;
    };
    Reference r;
    std::vector<double> xin(x.begin(), x.end());
    std::vector<int> arg1, arg2;
    r.conv1 = conv(xin, 1, c1, h, w, 0, 1);
    r.pool1 = pool(r.conv1, c1, h, w, arg1);
    r.conv2 = conv(r.pool1, c1, c2, h / 2, w / 2, 2, 3);
    r.pool2 = pool(r.conv2, c2, h / 2, w / 2, arg2);
    const int h4 = h / 4, w4 = w / 4;
    std::vector<double> flat(static_cast<std::size_t>(n) * fin);
    for (int b = 0; b < n; ++b)
        for (int c = 0; c < c2; ++c)
            for (int i = 0; i < h4; ++i)
                for (int j = 0; j < w4; ++j)
                    flat[b * fin + (i * w4 + j) * c2 + c] = r.pool2[((b * c2 + c) * h4 + i) * w4 + j];
    r.fc1.assign(static_cast<std::size_t>(n) * f, 0);
    for (int b = 0; b < n; ++b)
        for (int o = 0; o < f; ++o) {
            double acc = P(5)[o];
            for (int i = 0; i < fin; ++i) acc += flat[b * fin + i] * P(4)[o * fin + i];
            r.fc1[b * f + o] = acc > 0 ? acc : 0;
        }
    r.logits.assign(static_cast<std::size_t>(n) * z, 0);
    for (int b = 0; b < n; ++b)
        for (int o = 0; o < z; ++o) {
            double acc = P(7)[o];
            for (int i = 0; i < f; ++i) acc += r.fc1[b * f + i] * P(6)[o * f + i];
            r.logits[b * z + o] = acc;
        }
    // Loss and backward.
    std::vector<double> dl(r.logits.size());
    for (int b = 0; b < n; ++b) {
        double mx = r.logits[b * z], sum = 0;
        for (int j = 0; j < z; ++j) mx = std::max(mx, r.logits[b * z + j]);
        for (int j = 0; j < z; ++j) sum += std::exp(r.logits[b * z + j] - mx);
        r.loss += (std::log(sum) - (r.logits[b * z + labels[b]] - mx)) / n;
        for (int j = 0; j < z; ++j) dl[b * z + j] = (std::exp(r.logits[b * z + j] - mx) / sum - (j == labels[b])) / n;
    }
    r.grads.resize(p.tensors().size());
    for (std::size_t t = 0; t < p.tensors().size(); ++t) r.grads[t].assign(p.tensor(t).size(), 0.0);
    std::vector<double> dfc1(r.fc1.size(), 0), dflat(flat.size(), 0);
    for (int b = 0; b < n; ++b)
        for (int o = 0; o < z; ++o) {
            r.grads[7][o] += dl[b * z + o];
            for (int i = 0; i < f; ++i) {
                r.grads[6][o * f + i] += dl[b * z + o] * r.fc1[b * f + i];
                dfc1[b * f + i] += dl[b * z + o] * P(6)[o * f + i];
            }
        }
    for (int b = 0; b < n; ++b)
        for (int o = 0; o < f; ++o) {
            const double d = r.fc1[b * f + o] > 0 ? dfc1[b * f + o] : 0;
            r.grads[5][o] += d;
            for (int i = 0; i < fin; ++i) {
                r.grads[4][o * fin + i] += d * flat[b * fin + i];
                dflat[b * fin + i] += d * P(4)[o * fin + i];
            }
        }
    // Unflatten, route through the max-pools and ReLUs, accumulate conv gradients.
    std::vector<double> dconv2(r.conv2.size(), 0), dpool1(r.pool1.size(), 0), dconv1(r.conv1.size(), 0);
    for (int b = 0; b < n; ++b)
        for (int c = 0; c < c2; ++c)
            for (int i = 0; i < h4; ++i)
                for (int j = 0; j < w4; ++j)
                    dconv2[arg2[((b * c2 + c) * h4 + i) * w4 + j]] += dflat[b * fin + (i * w4 + j) * c2 + c];
    auto conv_back = [&](const std::vector<double>& in, const std::vector<double>& out, std::vector<double>& dout,
                         std::vector<double>* din, int ci, int co, int hh, int ww, int wt) {
        for (std::size_t i = 0; i < dout.size(); ++i) dout[i] = out[i] > 0 ? dout[i] : 0;
        for (int b = 0; b < n; ++b)
            for (int o = 0; o < co; ++o)
                for (int i = 0; i < hh; ++i)
                    for (int j = 0; j < ww; ++j) {
                        const double d = dout[((b * co + o) * hh + i) * ww + j];
                        r.grads[wt + 1][o] += d;
                        if (d == 0) continue;
                        for (int c = 0; c < ci; ++c)
                            for (int ki = 0; ki < k; ++ki)
                                for (int kj = 0; kj < k; ++kj) {
                                    const int y = i + ki - pad, xx = j + kj - pad;
                                    if (y < 0 || y >= hh || xx < 0 || xx >= ww) continue;
                                    const int src = ((b * ci + c) * hh + y) * ww + xx;
                                    const int wi = ((o * ci + c) * k + ki) * k + kj;
                                    r.grads[wt][wi] += d * in[src];
                                    if (din != nullptr) (*din)[src] += d * P(wt)[wi];
                                }
                    }
    };
    conv_back(r.pool1, r.conv2, dconv2, &dpool1, c1, c2, h / 2, w / 2, 2);
    for (std::size_t i = 0; i < dpool1.size(); ++i) dconv1[arg1[i]] += dpool1[i];
    conv_back(xin, r.conv1, dconv1, nullptr, 1, c1, h, w, 0);
    return r;
}

}  // namespace psrun::worker::test
