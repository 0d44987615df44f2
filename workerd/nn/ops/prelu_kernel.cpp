// The prelu kernel: hand loops in f32 on plain layouts (oneDNN 2.6's prelu wants the weights in
// the source's data type, and ours are f32 master weights or a value of either type). The input
// is seen as [N, C, inner]; the slope as one value or one per channel. Backward: dX = dY where
// x > 0, slope * dY elsewhere; dSlope[c] = sum of dY * x where x <= 0, over N and inner (a
// shared slope sums everything). The loops multiply by a selected factor (1 or the slope) rather
// than branch, so that they vectorize (a branch per element mispredicts on activations' random
// signs); the values are those of the branches, bit for bit.
#include <algorithm>
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

struct Geometry {
    std::int64_t n = 1, c = 1, inner = 1;
    bool shared = false;
};

class PreluKernel final : public Kernel {
  public:
    // Backward reads the input and the slope, not the output.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads{BackwardReads::kAllInputs, false};
        reads.as_converted = BackwardReads::kAllInputs;  // every input as input_plain() gave it
        return reads;
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const MemDims in = b.input_dims(0);
        Geometry g;
        g.n = in[0];
        g.c = in[1];
        for (std::size_t d = 2; d < in.size(); ++d) g.inner *= in[d];
        g.shared = element_count(b.input_dims(1)) == 1;
        const memory x = b.input_plain(0, Dt::f32), a = b.input_plain(1, Dt::f32);
        const memory::desc f32 = plain_desc(b.output_dims(0), Dt::f32);
        const Dt out_type = b.output_type(0);
        const memory y = out_type == Dt::f32 ? b.make_output(0, f32) : memory(f32, engine);
        b.forward([x, a, y, g] {
            const float* src = static_cast<const float*>(x.get_data_handle());
            const float* slope = static_cast<const float*>(a.get_data_handle());
            float* dst = static_cast<float*>(y.get_data_handle());
#pragma omp parallel for schedule(static)
            for (std::int64_t nc = 0; nc < g.n * g.c; ++nc) {
                const float s = slope[g.shared ? 0 : nc % g.c];
                const float* row = src + nc * g.inner;
                float* out = dst + nc * g.inner;
#pragma omp simd
                for (std::int64_t i = 0; i < g.inner; ++i) {
                    const float v = row[i];
                    out[i] = (v > 0.0f ? 1.0f : s) * v;
                }
            }
        });
        if (out_type != Dt::f32) b.forward(run_reorder(b, y, b.make_output(0, plain_desc(b.output_dims(0), out_type))));
        b.note("fwd: hand prelu (f32)");
        if (!b.needs_backward()) return;
        const memory dy = b.output_diff(0, f32);
        if (b.needs_input_grad(0)) {
            const memory dx = b.input_diff(0, plain_desc(in, Dt::f32));
            b.backward([x, a, dy, dx, g] {
                const float* src = static_cast<const float*>(x.get_data_handle());
                const float* slope = static_cast<const float*>(a.get_data_handle());
                const float* diff = static_cast<const float*>(dy.get_data_handle());
                float* out = static_cast<float*>(dx.get_data_handle());
#pragma omp parallel for schedule(static)
                for (std::int64_t nc = 0; nc < g.n * g.c; ++nc) {
                    const float s = slope[g.shared ? 0 : nc % g.c];
#pragma omp simd
                    for (std::int64_t i = nc * g.inner; i < (nc + 1) * g.inner; ++i) {
                        out[i] = (src[i] > 0.0f ? 1.0f : s) * diff[i];
                    }
                }
            });
        }
        if (b.needs_input_grad(1)) {
            const memory da = b.input_diff(1, plain_desc(b.input_dims(1), Dt::f32));
            b.backward([x, dy, da, g] {
                const float* src = static_cast<const float*>(x.get_data_handle());
                const float* diff = static_cast<const float*>(dy.get_data_handle());
                float* out = static_cast<float*>(da.get_data_handle());
                const std::int64_t slopes = g.shared ? 1 : g.c;
#pragma omp parallel for schedule(static)
                for (std::int64_t k = 0; k < slopes; ++k) {
                    double sum = 0.0;
                    for (std::int64_t n = 0; n < g.n; ++n)
                        for (std::int64_t c = g.shared ? 0 : k; c < (g.shared ? g.c : k + 1); ++c) {
                            const std::int64_t begin = (n * g.c + c) * g.inner, end = begin + g.inner;
#pragma omp simd reduction(+ : sum)
                            for (std::int64_t i = begin; i < end; ++i) {
                                // x > 0 adds 0; else dY x, exact in double (a product of two floats).
                                sum += static_cast<double>(diff[i]) * std::min(src[i], 0.0f);
                            }
                        }
                    out[k] = static_cast<float>(sum);
                }
            });
        }
    }
};

}  // namespace

std::unique_ptr<Kernel> make_prelu_kernel() { return std::make_unique<PreluKernel>(); }

}  // namespace psrun::nn
