#include "workerd/nn/ops/batch_stats.h"

#include <algorithm>
#include <cstdint>
#include <optional>

#include "common/wire_precision.h"

namespace psrun::nn::batch_norm {

using namespace dnnl;

namespace {
inline double ld(const float* p, std::int64_t i) { return p[i]; }
inline double ld(const std::uint16_t* p, std::int64_t i) { return wire::to_f32(p[i]); }

// batch_stats' sums over one block of L channels (nChw8c, nChw16c) in registers.
template <int L, typename T>
void block_sums(const T* base, std::int64_t size, std::int64_t stride, const float* k, double* sum, double* sq) {
    double a[L] = {}, b[L] = {}, kk[L];
    for (int j = 0; j < L; ++j) kk[j] = k[j];
    for (std::int64_t s = 0; s < size; ++s) {
        const T* at = base + s * stride;
        for (int j = 0; j < L; ++j) {
            const double d = ld(at, j) - kk[j];
            a[j] += d;
            b[j] += d * d;
        }
    }
    for (int j = 0; j < L; ++j) {
        sum[j] = a[j];
        sq[j] = b[j];
    }
}

// The batch's per-channel mean and population variance: per (example, channel group) the sums
// of d = x - k[c] and d^2 in double (k[c]: channel c's first value, so that the variance
// E[d^2] - E[d]^2 does not cancel), OpenMP over the (example, group) pairs, then added up per
// channel in a fixed order (deterministic). `part` holds 2 x lanes doubles per pair, `shift`
// lanes x groups floats.
template <typename T>
void stats_of(const ChannelLayout& l, const T* x, double* part, float* shift, float* mean, float* var) {
    const std::int64_t lanes = l.lanes, pairs = l.n * l.groups;
    const T* first = x + l.offset0;
    for (std::int64_t g = 0; g < l.groups; ++g)
        for (std::int64_t j = 0; j < lanes; ++j)
            shift[g * lanes + j] = static_cast<float>(ld(first, g * l.group_stride + j));
#pragma omp parallel for schedule(static)
    for (std::int64_t pair = 0; pair < pairs; ++pair) {
        const std::int64_t n = pair / l.groups, g = pair % l.groups;
        const T* base = first + n * l.n_stride + g * l.group_stride;
        const float* k = shift + g * lanes;
        double* sum = part + pair * 2 * lanes;
        double* sq = sum + lanes;
        if (lanes == 1) {  // four chains, so that the adds do not wait on each other
            double a[4] = {}, b[4] = {};
            const double k0 = k[0];
            std::int64_t s = 0;
            for (; s + 4 <= l.s; s += 4)
                for (int j = 0; j < 4; ++j) {
                    const double d = ld(base, (s + j) * l.s_stride) - k0;
                    a[j] += d;
                    b[j] += d * d;
                }
            for (; s < l.s; ++s) {
                const double d = ld(base, s * l.s_stride) - k0;
                a[0] += d;
                b[0] += d * d;
            }
            sum[0] = (a[0] + a[1]) + (a[2] + a[3]);
            sq[0] = (b[0] + b[1]) + (b[2] + b[3]);
            continue;
        }
        if (lanes == 8) {
            block_sums<8>(base, l.s, l.s_stride, k, sum, sq);
        } else if (lanes == 16) {
            block_sums<16>(base, l.s, l.s_stride, k, sum, sq);
        } else {
            std::fill(sum, sum + 2 * lanes, 0.0);
            for (std::int64_t s = 0; s < l.s; ++s) {
                const T* at = base + s * l.s_stride;
                for (std::int64_t j = 0; j < lanes; ++j) {
                    const double d = ld(at, j) - k[j];
                    sum[j] += d;
                    sq[j] += d * d;
                }
            }
        }
    }
    const auto count = static_cast<double>(l.n * l.s);
    for (std::int64_t c = 0; c < l.c; ++c) {
        const std::int64_t g = c / lanes, j = c % lanes;
        double sum = 0, sq = 0;
        for (std::int64_t n = 0; n < l.n; ++n) {
            const double* at = part + (n * l.groups + g) * 2 * lanes;
            sum += at[j];
            sq += at[lanes + j];
        }
        const double m = sum / count;
        mean[c] = static_cast<float>(shift[g * lanes + j] + m);
        var[c] = static_cast<float>(std::max(sq / count - m * m, 0.0));
    }
}

}  // namespace

std::optional<ChannelLayout> channel_layout(const memory::desc& md) {
    const dnnl_memory_desc_t& d = md.data;
    if (d.format_kind != dnnl_blocked || d.ndims < 2 || (d.data_type != dnnl_f32 && d.data_type != dnnl_bf16))
        return std::nullopt;
    const dnnl_blocking_desc_t& blk = d.format_desc.blocking;
    ChannelLayout l;
    l.n = d.dims[0];
    l.c = d.dims[1];
    l.n_stride = blk.strides[0];
    l.offset0 = d.offset0;
    int last = -1;  // the innermost spatial dim over 1
    for (int i = 2; i < d.ndims; ++i) {
        if (d.padded_dims[i] != d.dims[i]) return std::nullopt;
        l.s *= d.dims[i];
        if (d.dims[i] == 1) continue;
        if (last >= 0 && blk.strides[last] != blk.strides[i] * d.dims[i]) return std::nullopt;
        last = i;
    }
    l.s_stride = last >= 0 ? blk.strides[last] : 0;
    if (blk.inner_nblks == 0) {
        if (blk.strides[1] == 1 && l.c > 1) {  // channels last
            l.lanes = l.c;
            l.groups = 1;
        } else {
            l.lanes = 1;
            l.groups = l.c;
            l.group_stride = blk.strides[1];
        }
    } else if (blk.inner_nblks == 1 && blk.inner_idxs[0] == 1) {
        l.lanes = blk.inner_blks[0];
        l.groups = d.padded_dims[1] / l.lanes;
        l.group_stride = blk.strides[1];
    } else {
        return std::nullopt;
    }
    return l;
}

void batch_stats(const ChannelLayout& l, const float* x, double* part, float* shift, float* mean, float* var) {
    stats_of(l, x, part, shift, mean, var);
}

void batch_stats(const ChannelLayout& l, const std::uint16_t* x, double* part, float* shift, float* mean, float* var) {
    stats_of(l, x, part, shift, mean, var);
}

}  // namespace psrun::nn::batch_norm
