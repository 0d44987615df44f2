// Naive reference loops (double) for the normalisation kinds on plain buffers, straight from
// the definitions: batch_norm over [N, C, S] (S the spatial size) with the batch's statistics
// or given ones, and its gradients; layer_norm over [rows, F]. For tests only.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

namespace psrun::nn::test {

struct NormRef {
    std::vector<double> y, dx, dscale, dbias;
    std::vector<double> mean, var;  // the statistics used (batch: population variance)
};

// x, dy: [n, c, s]; scale/bias empty: 1 and 0. With `stats` (mean, var) given, they are used
// (evaluation, no gradients computed); else the batch's.
inline NormRef batch_norm_ref(const std::vector<float>& x, const std::vector<float>& dy, std::int64_t n, std::int64_t c,
                              std::int64_t s, const std::vector<float>& scale, const std::vector<float>& bias,
                              double eps, const std::vector<float>* run_mean = nullptr,
                              const std::vector<float>* run_var = nullptr) {
    NormRef r;
    const auto at = [&](std::int64_t b, std::int64_t ch, std::int64_t i) {
        return static_cast<std::size_t>((b * c + ch) * s + i);
    };
    r.y.assign(x.size(), 0);
    r.dx.assign(x.size(), 0);
    r.dscale.assign(static_cast<std::size_t>(c), 0);
    r.dbias.assign(static_cast<std::size_t>(c), 0);
    const double count = static_cast<double>(n * s);
    for (std::int64_t ch = 0; ch < c; ++ch) {
        const auto k = static_cast<std::size_t>(ch);
        double mean = 0, var = 0;
        if (run_mean != nullptr) {
            mean = (*run_mean)[k];
            var = (*run_var)[k];
        } else {
            for (std::int64_t b = 0; b < n; ++b)
                for (std::int64_t i = 0; i < s; ++i) mean += x[at(b, ch, i)];
            mean /= count;
            for (std::int64_t b = 0; b < n; ++b)
                for (std::int64_t i = 0; i < s; ++i) var += (x[at(b, ch, i)] - mean) * (x[at(b, ch, i)] - mean);
            var /= count;
        }
        r.mean.push_back(mean);
        r.var.push_back(var);
        const double g = scale.empty() ? 1.0 : scale[k], beta = bias.empty() ? 0.0 : bias[k];
        const double inv = 1.0 / std::sqrt(var + eps);
        double sum_dy = 0, sum_dy_xhat = 0;
        for (std::int64_t b = 0; b < n; ++b)
            for (std::int64_t i = 0; i < s; ++i) {
                const double xhat = (x[at(b, ch, i)] - mean) * inv;
                r.y[at(b, ch, i)] = g * xhat + beta;
                if (dy.empty()) continue;
                sum_dy += dy[at(b, ch, i)];
                sum_dy_xhat += dy[at(b, ch, i)] * xhat;
            }
        r.dscale[k] = sum_dy_xhat;
        r.dbias[k] = sum_dy;
        if (dy.empty() || run_mean != nullptr) continue;
        // dx = g inv / m (m dy - sum(dy) - xhat sum(dy xhat))
        for (std::int64_t b = 0; b < n; ++b)
            for (std::int64_t i = 0; i < s; ++i) {
                const double xhat = (x[at(b, ch, i)] - mean) * inv;
                r.dx[at(b, ch, i)] = g * inv / count * (count * dy[at(b, ch, i)] - sum_dy - xhat * sum_dy_xhat);
            }
    }
    return r;
}

// x, dy: [rows, f]; scale/bias [f] or empty.
inline NormRef layer_norm_ref(const std::vector<float>& x, const std::vector<float>& dy, std::int64_t rows,
                              std::int64_t f, const std::vector<float>& scale, const std::vector<float>& bias,
                              double eps) {
    NormRef r;
    r.y.assign(x.size(), 0);
    r.dx.assign(x.size(), 0);
    r.dscale.assign(static_cast<std::size_t>(f), 0);
    r.dbias.assign(static_cast<std::size_t>(f), 0);
    for (std::int64_t row = 0; row < rows; ++row) {
        const auto base = static_cast<std::size_t>(row * f);
        double mean = 0, var = 0;
        for (std::int64_t j = 0; j < f; ++j) mean += x[base + static_cast<std::size_t>(j)];
        mean /= static_cast<double>(f);
        for (std::int64_t j = 0; j < f; ++j) {
            const double d = x[base + static_cast<std::size_t>(j)] - mean;
            var += d * d;
        }
        var /= static_cast<double>(f);
        const double inv = 1.0 / std::sqrt(var + eps);
        // dxhat = dy * g; dx = inv / f (f dxhat - sum(dxhat) - xhat sum(dxhat xhat))
        double sum_dxhat = 0, sum_dxhat_xhat = 0;
        for (std::int64_t j = 0; j < f; ++j) {
            const auto i = base + static_cast<std::size_t>(j), k = static_cast<std::size_t>(j);
            const double xhat = (x[i] - mean) * inv;
            const double g = scale.empty() ? 1.0 : scale[k];
            r.y[i] = g * xhat + (bias.empty() ? 0.0 : bias[k]);
            if (dy.empty()) continue;
            r.dscale[k] += dy[i] * xhat;
            r.dbias[k] += dy[i];
            sum_dxhat += dy[i] * g;
            sum_dxhat_xhat += dy[i] * g * xhat;
        }
        if (dy.empty()) continue;
        for (std::int64_t j = 0; j < f; ++j) {
            const auto i = base + static_cast<std::size_t>(j), k = static_cast<std::size_t>(j);
            const double xhat = (x[i] - mean) * inv;
            const double g = scale.empty() ? 1.0 : scale[k];
            r.dx[i] =
                inv / static_cast<double>(f) * (static_cast<double>(f) * dy[i] * g - sum_dxhat - xhat * sum_dxhat_xhat);
        }
    }
    return r;
}

}  // namespace psrun::nn::test
