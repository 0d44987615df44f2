// softmax_cross_entropy_loss and nll_loss (ops/cross_entropy.cpp): hand loops on the host in
// double over plain f32 scores (a reorder first where the engine holds them in another format or
// in bf16), int32 labels and f32 class weights, the scores seen as [rows, C, inner].
// Forward: every label checked first (one outside [0, C) that is not ignore_index throws before
// anything is written), then each position's loss (and the softmax's log-normaliser, kept for
// the backward) in parallel over positions, then the reduction in position order on one thread,
// so the loss has the same bits whatever the thread count. The output is computed in f32 and
// reordered to the output's type (bf16 activations) where it differs.
// Backward: dX per position from the output's gradient (divided by the mean's denominator), in
// f32; the class weights' gradient, where the engine asks for one, is zero (torch gives none).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

enum class Reduction { kMean, kSum, kNone };

struct LossPlan {
    std::int64_t rows = 0, classes = 0, inner = 1;  // scores [rows, classes, inner]
    std::int64_t batch = 1;
    bool nll = false;
    bool has_ignore = false;
    std::int32_t ignore = 0;
    double smoothing = 0.0;
    Reduction reduction = Reduction::kMean;

    std::int64_t positions() const { return rows * inner; }
    bool ignored(std::int32_t label) const { return has_ignore && label == ignore; }
};

// Per-step values the backward reads, allocated at build.
struct LossState {
    std::vector<double> loss;    // per position
    std::vector<double> weight;  // w[y] per position (0 where ignored)
    std::vector<double> norm;    // log(sum exp(x)) per position (softmax only)
    double denominator = 0.0;    // the mean's: sum of weight
    double weight_sum = 0.0;     // sum_k w_k
};

// Throws std::out_of_range for the first label outside [0, C) that is not ignored.
void check_labels(const LossPlan& p, const std::int32_t* labels) {
    for (std::int64_t q = 0; q < p.positions(); ++q) {
        const std::int32_t y = labels[q];
        if (p.ignored(y) || (y >= 0 && y < p.classes)) continue;
        const std::int64_t row = q / p.inner, at = q % p.inner;
        std::string where = (p.rows == p.batch ? "example " : "row ") + std::to_string(row);
        if (p.inner > 1) where += ", position " + std::to_string(at);
        throw std::out_of_range(
            "label " + std::to_string(y) + " of " + where + " is outside the classes [0, " + std::to_string(p.classes) +
            ")" + (p.has_ignore ? " and is not ignore_index " + std::to_string(p.ignore) : std::string()));
    }
}

void forward_loss(const LossPlan& p, LossState& s, const float* x, const std::int32_t* labels, const float* w,
                  float* out) {
    check_labels(p, labels);
    const std::int64_t n = p.positions(), c_count = p.classes, inner = p.inner;
    double weight_sum = static_cast<double>(c_count);
    if (w != nullptr) {
        weight_sum = 0.0;
        for (std::int64_t c = 0; c < c_count; ++c) weight_sum += w[c];
    }
    s.weight_sum = weight_sum;
    const double e = p.smoothing;
#pragma omp parallel for schedule(static)
    for (std::int64_t q = 0; q < n; ++q) {
        const std::int32_t y = labels[q];
        if (p.ignored(y)) {
            s.loss[static_cast<std::size_t>(q)] = 0.0;
            s.weight[static_cast<std::size_t>(q)] = 0.0;
            continue;
        }
        const float* row = x + (q / inner) * c_count * inner + q % inner;  // element c at row[c * inner]
        const double wy = w != nullptr ? static_cast<double>(w[y]) : 1.0;
        double loss;
        if (p.nll) {
            loss = -wy * static_cast<double>(row[y * inner]);
        } else {
            double mx = row[0];
            for (std::int64_t c = 1; c < c_count; ++c) mx = std::max(mx, static_cast<double>(row[c * inner]));
            double sum = 0.0;
            for (std::int64_t c = 0; c < c_count; ++c) sum += std::exp(static_cast<double>(row[c * inner]) - mx);
            const double lse = mx + std::log(sum);
            s.norm[static_cast<std::size_t>(q)] = lse;
            loss = -wy * (static_cast<double>(row[y * inner]) - lse);
            if (e > 0.0) {
                double smooth = 0.0;
                for (std::int64_t c = 0; c < c_count; ++c)
                    smooth -=
                        (w != nullptr ? static_cast<double>(w[c]) : 1.0) * (static_cast<double>(row[c * inner]) - lse);
                loss = (1.0 - e) * loss + e * smooth / static_cast<double>(c_count);
            }
        }
        s.loss[static_cast<std::size_t>(q)] = loss;
        s.weight[static_cast<std::size_t>(q)] = wy;
    }
    if (p.reduction == Reduction::kNone) {
        for (std::int64_t q = 0; q < n; ++q) out[q] = static_cast<float>(s.loss[static_cast<std::size_t>(q)]);
        return;
    }
    double total = 0.0, denominator = 0.0;
    for (std::int64_t q = 0; q < n; ++q) {
        total += s.loss[static_cast<std::size_t>(q)];
        denominator += s.weight[static_cast<std::size_t>(q)];
    }
    s.denominator = denominator;
    if (p.reduction == Reduction::kSum) out[0] = static_cast<float>(total);
    else out[0] = denominator != 0.0 ? static_cast<float>(total / denominator) : 0.0f;  // torch: nan
}

void backward_loss(const LossPlan& p, const LossState& s, const float* x, const std::int32_t* labels, const float* w,
                   const float* dy, float* dx) {
    const std::int64_t n = p.positions(), c_count = p.classes, inner = p.inner;
    double scale = 1.0;
    if (p.reduction == Reduction::kMean) scale = s.denominator != 0.0 ? 1.0 / s.denominator : 0.0;
    const double e = p.smoothing, weight_sum = s.weight_sum;
#pragma omp parallel for schedule(static)
    for (std::int64_t q = 0; q < n; ++q) {
        const std::int64_t base = (q / inner) * c_count * inner + q % inner;
        const float* row = x + base;
        float* grad = dx + base;
        const std::int32_t y = labels[q];
        if (p.ignored(y)) {
            for (std::int64_t c = 0; c < c_count; ++c) grad[c * inner] = 0.0f;
            continue;
        }
        const double g =
            (p.reduction == Reduction::kNone ? static_cast<double>(dy[q]) : static_cast<double>(dy[0]) * scale);
        const double wy = s.weight[static_cast<std::size_t>(q)];
        if (p.nll) {
            for (std::int64_t c = 0; c < c_count; ++c) grad[c * inner] = 0.0f;
            grad[y * inner] = static_cast<float>(-wy * g);
            continue;
        }
        const double lse = s.norm[static_cast<std::size_t>(q)];
        const double hard = (1.0 - e) * wy, soft = e / static_cast<double>(c_count);
        for (std::int64_t c = 0; c < c_count; ++c) {
            const double pc = std::exp(static_cast<double>(row[c * inner]) - lse);
            const double wc = w != nullptr ? static_cast<double>(w[c]) : 1.0;
            double d = hard * (pc - (c == y ? 1.0 : 0.0));
            if (e > 0.0) d += soft * (pc * weight_sum - wc);
            grad[c * inner] = static_cast<float>(g * d);
        }
    }
}

class CrossEntropyKernel final : public Kernel {
  public:
    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const Node& node = b.node();
        const auto& engine = b.context().engine;
        const MemDims dims = b.input_dims(0);
        auto plan = std::make_shared<LossPlan>();
        plan->rows = dims[0];
        plan->classes = dims[1];
        for (std::size_t d = 2; d < dims.size(); ++d) plan->inner *= dims[d];
        plan->batch = b.context().batch;
        plan->nll = node.op == "nll_loss";
        plan->has_ignore = node.attrs.contains("ignore_index");
        if (plan->has_ignore)
            plan->ignore = static_cast<std::int32_t>(node.attrs.at("ignore_index").get<std::int64_t>());
        plan->smoothing = node.attrs.value("label_smoothing", 0.0);
        const std::string reduction = node.attrs.at("reduction").get<std::string>();
        plan->reduction = reduction == "none"  ? Reduction::kNone
                          : reduction == "sum" ? Reduction::kSum
                                               : Reduction::kMean;

        auto state = std::make_shared<LossState>();
        const auto n = static_cast<std::size_t>(plan->positions());
        state->loss.assign(n, 0.0);
        state->weight.assign(n, 0.0);
        if (!plan->nll) state->norm.assign(n, 0.0);

        const memory x = b.input_plain(0, Dt::f32);
        const memory labels = b.input_plain(1, Dt::s32);
        const bool weighted = b.input_count() > 2;
        const memory w = weighted ? b.input_plain(2, Dt::f32) : memory();
        const Dt out_type = b.output_type(0);
        const memory::desc f32 = plain_desc(b.output_dims(0), Dt::f32);
        const memory y = out_type == Dt::f32 ? b.make_output(0, f32) : memory(f32, engine);
        b.forward([plan, state, x, labels, w, weighted, y] {
            forward_loss(*plan, *state, static_cast<const float*>(x.get_data_handle()),
                         static_cast<const std::int32_t*>(labels.get_data_handle()),
                         weighted ? static_cast<const float*>(w.get_data_handle()) : nullptr,
                         static_cast<float*>(y.get_data_handle()));
        });
        if (out_type != Dt::f32) b.forward(run_reorder(b, y, b.make_output(0, plain_desc(b.output_dims(0), out_type))));
        b.note("fwd: hand " + node.op + " (f64 over f32)");
        if (!b.needs_backward()) return;
        if (weighted && b.needs_input_grad(2))
            b.backward(run_zero(b.input_diff(2, plain_desc(b.input_dims(2), Dt::f32))));
        if (!b.needs_input_grad(0)) return;
        const memory dy = b.output_diff(0, f32);
        const memory dx = b.input_diff(0, plain_desc(dims, Dt::f32));
        b.backward([plan, state, x, labels, w, weighted, dy, dx] {
            backward_loss(*plan, *state, static_cast<const float*>(x.get_data_handle()),
                          static_cast<const std::int32_t*>(labels.get_data_handle()),
                          weighted ? static_cast<const float*>(w.get_data_handle()) : nullptr,
                          static_cast<const float*>(dy.get_data_handle()), static_cast<float*>(dx.get_data_handle()));
        });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_cross_entropy_kernel() { return std::make_unique<CrossEntropyKernel>(); }

}  // namespace psrun::nn
