#include "workerd/nn/kernels/broadcast_sum.h"

#include <omp.h>

#include <algorithm>
#include <stdexcept>

namespace psrun::nn::kernels {

namespace {

// Below this many elements one thread does the whole sum (a parallel region costs more).
constexpr std::int64_t kParallelElements = 1 << 15;

}  // namespace

BroadcastSum::BroadcastSum(const std::vector<std::int64_t>& from, const std::vector<std::int64_t>& to) {
    if (from.size() != to.size()) throw std::invalid_argument("broadcast sum: ranks differ");
    // Merge neighbouring axes of the same kind (kept or summed); axes of size 1 drop out.
    struct Axis {
        std::int64_t size;
        bool kept;
    };
    std::vector<Axis> runs;
    for (std::size_t d = 0; d < from.size(); ++d) {
        if (to[d] != from[d] && to[d] != 1) throw std::invalid_argument("broadcast sum: dims do not broadcast");
        if (from[d] == 1) continue;
        const bool kept = to[d] == from[d];
        if (!runs.empty() && runs.back().kept == kept) runs.back().size *= from[d];
        else runs.push_back({from[d], kept});
    }
    for (const auto t : to) out_count_ *= t;
    if (runs.empty()) return;  // one element
    inner_ = runs.back().size;
    inner_kept_ = runs.back().kept;
    // Output strides of the outer runs: the product of the kept sizes after each.
    std::int64_t stride = inner_kept_ ? inner_ : 1;
    outer_.resize(runs.size() - 1);
    for (std::size_t i = outer_.size(); i-- > 0;) {
        outer_[i] = {runs[i].size, runs[i].kept ? stride : 0};
        if (runs[i].kept) stride *= runs[i].size;
        rows_ *= runs[i].size;
    }
}

void BroadcastSum::sum_rows(const float* a, const float* b, std::int64_t row0, std::int64_t row1, double* acc) const {
    // The index along each outer run of row0, then counted up row by row.
    std::vector<std::int64_t> index(outer_.size());
    std::int64_t base = 0;
    for (std::int64_t r = row0, i = static_cast<std::int64_t>(outer_.size()); i-- > 0;) {
        index[static_cast<std::size_t>(i)] = r % outer_[static_cast<std::size_t>(i)].size;
        r /= outer_[static_cast<std::size_t>(i)].size;
        base += index[static_cast<std::size_t>(i)] * outer_[static_cast<std::size_t>(i)].out_stride;
    }
    const std::int64_t n = inner_;
    for (std::int64_t row = row0; row < row1; ++row) {
        const float* x = a + row * n;
        const float* y = b ? b + row * n : nullptr;
        double* out = acc + base;
        if (inner_kept_) {
            if (y) {
                for (std::int64_t k = 0; k < n; ++k) out[k] += static_cast<double>(x[k]) * y[k];
            } else {
                for (std::int64_t k = 0; k < n; ++k) out[k] += x[k];
            }
        } else {
            double s = 0;
            if (y) {
#pragma omp simd reduction(+ : s)
                for (std::int64_t k = 0; k < n; ++k) s += static_cast<double>(x[k]) * y[k];
            } else {
#pragma omp simd reduction(+ : s)
                for (std::int64_t k = 0; k < n; ++k) s += x[k];
            }
            *out += s;
        }
        // The next row's indices and output offset.
        for (std::size_t i = outer_.size(); i-- > 0;) {
            base += outer_[i].out_stride;
            if (++index[i] < outer_[i].size) break;
            base -= outer_[i].out_stride * outer_[i].size;
            index[i] = 0;
        }
    }
}

void BroadcastSum::run(const float* a, const float* b, float* to, float scale) {
    const auto out = static_cast<std::size_t>(out_count_);
    const int threads =
        rows_ * inner_ < kParallelElements ? 1 : static_cast<int>(std::min<std::int64_t>(omp_get_max_threads(), rows_));
    partial_.assign(static_cast<std::size_t>(threads) * out, 0.0);
    if (threads == 1) {
        sum_rows(a, b, 0, rows_, partial_.data());
    } else {
#pragma omp parallel num_threads(threads)
        {
            const std::int64_t t = omp_get_thread_num(), share = omp_get_num_threads();
            sum_rows(a, b, rows_ * t / share, rows_ * (t + 1) / share,
                     partial_.data() + static_cast<std::size_t>(t) * out);
        }
    }
    for (std::size_t j = 0; j < out; ++j) {
        double s = partial_[j];
        for (int t = 1; t < threads; ++t) s += partial_[static_cast<std::size_t>(t) * out + j];
        to[j] = static_cast<float>(scale * s);
    }
}

}  // namespace psrun::nn::kernels
