// The group_norm kernel, hand-written loops (oneDNN 2.6's layer and batch normalisation have
// no per-channel affine over groups). The input is plain [N, C, S] (S the spatial size), so
// group g of example n is one contiguous row of M = C/G * S values: row r = n * G + g.
//   forward: per row (OpenMP over rows), mean and variance (two passes, double sums), then
//     y = x * a[c] + b[c] with a = scale * rstd, b = bias - mean * a; mean and rstd kept.
//   backward: per row, per channel the sums of dy and dy * x give the channel's dbias and
//     dscale parts (per example, summed over N afterwards in a fixed order: deterministic) and
//     the row's sums of dxhat = scale * dy and dxhat * xhat; then
//     dx = rstd (dxhat - (sum dxhat + xhat sum(dxhat xhat)) / M).
// Activations in the activation type (f32 or bf16, read and written as such), statistics,
// gradients and the arithmetic in f32.
#include <cmath>
#include <memory>
#include <vector>

#include "common/wire_precision.h"
#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/normalization.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

inline float gn_ld(const float* p, std::int64_t i) { return p[i]; }
inline float gn_ld(const std::uint16_t* p, std::int64_t i) { return wire::to_f32(p[i]); }
inline void st(float* p, std::int64_t i, float v) { p[i] = v; }
inline void st(std::uint16_t* p, std::int64_t i, float v) { p[i] = wire::to_bf16(v); }

// The sums of f(i) and g(i) over [0, n) in 8 float lanes each (so that the compiler vectorises
// them; float lanes over at most n / 8 terms each), added up in double.
template <typename F, typename G>
void lane_sums(std::int64_t n, F f, G g, double& sum_f, double& sum_g) {
    float a[8] = {}, b[8] = {};
    std::int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; ++j) {
            a[j] += f(i + j);
            b[j] += g(i + j);
        }
    sum_f = 0;
    sum_g = 0;
    for (; i < n; ++i) {
        sum_f += f(i);
        sum_g += g(i);
    }
    for (int j = 0; j < 8; ++j) {
        sum_f += a[j];
        sum_g += b[j];
    }
}

struct GroupPlan {
    std::int64_t n = 1, c = 1, g = 1, s = 1;
    bool per_group = false;  // scale and bias [G] (else [C])
    float epsilon = 1e-5f;
    std::int64_t cpg() const { return c / g; }
    std::int64_t m() const { return c / g * s; }
    std::int64_t rows() const { return n * g; }
    // The affine index of channel `ch`.
    std::int64_t affine(std::int64_t ch) const { return per_group ? ch / cpg() : ch; }
};

struct Stats {
    std::vector<float> mean, rstd;
    std::vector<float> part_scale, part_bias;  // [N, C]: per example and channel
};

template <typename In, typename Out>
void forward_loop(const GroupPlan& p, const In* x, Out* y, const float* scale, const float* bias, Stats& stats) {
    const std::int64_t m = p.m(), cpg = p.cpg();
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < p.rows(); ++r) {
        const std::int64_t base = r * m;
        double sum = 0, var = 0, unused = 0;
        lane_sums(
            m, [&](std::int64_t i) { return gn_ld(x, base + i); }, [](std::int64_t) { return 0.0f; }, sum, unused);
        const double mean = sum / static_cast<double>(m);
        // Two passes: the squares of the deviations from the mean (no cancellation).
        const auto mean_f = static_cast<float>(mean);
        lane_sums(
            m,
            [&](std::int64_t i) {
                const float d = gn_ld(x, base + i) - mean_f;
                return d * d;
            },
            [](std::int64_t) { return 0.0f; }, var, unused);
        const auto rstd = static_cast<float>(1.0 / std::sqrt(var / static_cast<double>(m) + p.epsilon));
        stats.mean[static_cast<std::size_t>(r)] = static_cast<float>(mean);
        stats.rstd[static_cast<std::size_t>(r)] = rstd;
        const std::int64_t first = (r % p.g) * cpg;
        for (std::int64_t k = 0; k < cpg; ++k) {
            const std::int64_t a_index = p.affine(first + k);
            const float a = (scale ? scale[a_index] : 1.0f) * rstd;
            const float b = (bias ? bias[a_index] : 0.0f) - static_cast<float>(mean) * a;
            const std::int64_t at = base + k * p.s;
            for (std::int64_t i = 0; i < p.s; ++i) st(y, at + i, gn_ld(x, at + i) * a + b);
        }
    }
}

template <typename In>
void backward_loop(const GroupPlan& p, const In* x, const float* dy, float* dx, const float* scale, Stats& stats) {
    const std::int64_t m = p.m(), cpg = p.cpg();
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < p.rows(); ++r) {
        const std::int64_t base = r * m, first = (r % p.g) * cpg, example = r / p.g;
        const float mean = stats.mean[static_cast<std::size_t>(r)], rstd = stats.rstd[static_cast<std::size_t>(r)];
        double sum_dxhat = 0, sum_dxhat_xhat = 0;
        for (std::int64_t k = 0; k < cpg; ++k) {
            const std::int64_t at = base + k * p.s;
            double sdy = 0, dyxhat = 0;  // sums of dy and of dy * xhat over the channel
            lane_sums(
                p.s, [&](std::int64_t i) { return dy[at + i]; },
                [&](std::int64_t i) { return dy[at + i] * (gn_ld(x, at + i) - mean); }, sdy, dyxhat);
            dyxhat *= rstd;
            const auto slot = static_cast<std::size_t>(example * p.c + first + k);
            stats.part_scale[slot] = static_cast<float>(dyxhat);
            stats.part_bias[slot] = static_cast<float>(sdy);
            const double g = scale ? scale[p.affine(first + k)] : 1.0;
            sum_dxhat += g * sdy;
            sum_dxhat_xhat += g * dyxhat;
        }
        const auto inv_m = 1.0 / static_cast<double>(m);
        const auto c1 = static_cast<float>(sum_dxhat * inv_m), c2 = static_cast<float>(sum_dxhat_xhat * inv_m);
        for (std::int64_t k = 0; k < cpg; ++k) {
            const float g = scale ? scale[p.affine(first + k)] : 1.0f;
            const std::int64_t at = base + k * p.s;
            for (std::int64_t i = 0; i < p.s; ++i) {
                const float xhat = (gn_ld(x, at + i) - mean) * rstd;
                dx[at + i] = rstd * (g * dy[at + i] - c1 - xhat * c2);
            }
        }
    }
}

// The tensor's gradient from the per-example parts: summed over N (and the group's channels
// when per group), in a fixed order.
void reduce_parts(const GroupPlan& p, const std::vector<float>& parts, float* out) {
    const std::int64_t size = p.per_group ? p.g : p.c;
    for (std::int64_t j = 0; j < size; ++j) out[j] = 0.0f;
    for (std::int64_t e = 0; e < p.n; ++e)
        for (std::int64_t ch = 0; ch < p.c; ++ch) out[p.affine(ch)] += parts[static_cast<std::size_t>(e * p.c + ch)];
}

class GroupNormKernel final : public Kernel {
  public:
    // Backward reads the input and the scale (and its own statistics), not the output.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads{BackwardReads::kAllInputs, false};
        reads.as_converted = BackwardReads::kAllInputs;  // every input as input_plain() gave it
        return reads;
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const Node& node = b.node();
        const auto dims = b.input_dims(0);
        GroupPlan p;
        p.n = dims[0];
        p.c = dims[1];
        for (std::size_t i = 2; i < dims.size(); ++i) p.s *= dims[i];
        p.g = node.attrs.at("groups").get<std::int64_t>();
        p.per_group = node.attrs.at("affine").get<std::string>() == "group";
        p.epsilon = static_cast<float>(node.attrs.at("epsilon").get<double>());
        const NormSlots slots = norm_slots(node);
        const bool has_scale = slots.scale >= 0, has_bias = slots.bias >= 0;
        const auto scale_slot = static_cast<std::size_t>(slots.scale), bias_slot = static_cast<std::size_t>(slots.bias);
        const Dt adt = b.context().activation_type(), out_type = b.output_type(0);
        const memory src = b.input_plain(0, adt);
        const memory scale = has_scale ? b.input_plain(scale_slot, Dt::f32) : memory();
        const memory bias = has_bias ? b.input_plain(bias_slot, Dt::f32) : memory();
        const memory dst = b.make_output(0, plain_desc(b.output_dims(0), out_type));
        auto stats = std::make_shared<Stats>();
        stats->mean.resize(static_cast<std::size_t>(p.rows()));
        stats->rstd.resize(stats->mean.size());
        b.note("group_norm: hand loops, " + std::to_string(p.rows()) + " rows of " + std::to_string(p.m()));
        b.forward([=] {
            const auto* sc = has_scale ? static_cast<const float*>(scale.get_data_handle()) : nullptr;
            const auto* bi = has_bias ? static_cast<const float*>(bias.get_data_handle()) : nullptr;
            void* y = dst.get_data_handle();
            if (adt == Dt::bf16) {
                const auto* x = static_cast<const std::uint16_t*>(src.get_data_handle());
                if (out_type == Dt::bf16) forward_loop(p, x, static_cast<std::uint16_t*>(y), sc, bi, *stats);
                else forward_loop(p, x, static_cast<float*>(y), sc, bi, *stats);
            } else {
                const auto* x = static_cast<const float*>(src.get_data_handle());
                if (out_type == Dt::bf16) forward_loop(p, x, static_cast<std::uint16_t*>(y), sc, bi, *stats);
                else forward_loop(p, x, static_cast<float*>(y), sc, bi, *stats);
            }
        });
        if (!b.needs_backward()) return;
        stats->part_scale.resize(static_cast<std::size_t>(p.n * p.c));
        stats->part_bias.resize(stats->part_scale.size());
        const memory::desc f32_desc = plain_desc(dims, Dt::f32);
        const memory ddst = b.output_diff(0, plain_desc(b.output_dims(0), Dt::f32));
        const memory dsrc = b.needs_input_grad(0) ? b.input_diff(0, f32_desc) : memory(f32_desc, b.context().engine);
        const bool grad_scale = has_scale && b.needs_input_grad(scale_slot),
                   grad_bias = has_bias && b.needs_input_grad(bias_slot);
        const memory dscale =
            grad_scale ? b.input_diff(scale_slot, plain_desc(b.input_dims(scale_slot), Dt::f32)) : memory();
        const memory dbias =
            grad_bias ? b.input_diff(bias_slot, plain_desc(b.input_dims(bias_slot), Dt::f32)) : memory();
        b.backward([=] {
            const auto* sc = has_scale ? static_cast<const float*>(scale.get_data_handle()) : nullptr;
            const auto* dy = static_cast<const float*>(ddst.get_data_handle());
            auto* dx = static_cast<float*>(dsrc.get_data_handle());
            if (adt == Dt::bf16)
                backward_loop(p, static_cast<const std::uint16_t*>(src.get_data_handle()), dy, dx, sc, *stats);
            else backward_loop(p, static_cast<const float*>(src.get_data_handle()), dy, dx, sc, *stats);
            if (grad_scale) reduce_parts(p, stats->part_scale, static_cast<float*>(dscale.get_data_handle()));
            if (grad_bias) reduce_parts(p, stats->part_bias, static_cast<float*>(dbias.get_data_handle()));
        });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_group_norm_kernel() { return std::make_unique<GroupNormKernel>(); }

}  // namespace psrun::nn
