// The power kernel: x^y in hand loops, f32 on plain layouts with numpy broadcasting
// (broadcast_loop.h), forward and backward. The backward computes x^y again rather than keep
// the output (build_broadcast_backward).
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/broadcast_loop.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

// d(x^y)/dx and d(x^y)/dy as torch.pow's backward masks them: 0 where y = 0, and 0 where x = 0
// and y >= 0 (ln 0 is -inf there, the product's limit 0).
float partial(std::size_t k, float x, float y) {
    if (k == 0) return y == 0.0f ? 0.0f : y * std::pow(x, y - 1.0f);
    if (x == 0.0f && y >= 0.0f) return 0.0f;
    return std::pow(x, y) * std::log(x);
}

class PowerKernel final : public Kernel {
  public:
    std::string label_suffix() const override { return " [hand]"; }

    // The backward reads both inputs (as input_plain() gave them), not the output; each input's
    // gradient is dZ times a factor, element by element, so it may be written over dZ.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads{BackwardReads::kAllInputs, false};
        reads.as_converted = BackwardReads::kAllInputs;
        reads.grad_over_output = 0b11u;
        return reads;
    }

    void build(KernelBuilder& b) override {
        const std::vector<MemDims> dims = {b.input_dims(0), b.input_dims(1)};
        const std::vector<memory> ins = {b.input_plain(0, Dt::f32), b.input_plain(1, Dt::f32)};
        const auto ix = std::make_shared<const BroadcastIndex>(b.output_dims(0), dims);
        const memory::desc f32 = plain_desc(b.output_dims(0), Dt::f32);
        const Dt out_type = b.output_type(0);
        const memory z = out_type == Dt::f32 ? b.make_output(0, f32) : memory(f32, b.context().engine);
        b.forward([ins, z, ix] {
            const float* in[2] = {static_cast<const float*>(ins[0].get_data_handle()),
                                  static_cast<const float*>(ins[1].get_data_handle())};
            float* out = static_cast<float*>(z.get_data_handle());
            for_each_element(*ix, in, 2, [&](std::int64_t e, const float* v) { out[e] = std::pow(v[0], v[1]); });
        });
        if (out_type != Dt::f32) b.forward(run_reorder(b, z, b.make_output(0, plain_desc(b.output_dims(0), out_type))));
        b.note("fwd: hand power (f32)");
        if (!b.needs_backward()) return;
        build_broadcast_backward(b, ix, ins, 0, 2,
                                 [](std::size_t k, const float* v) { return partial(k, v[0], v[1]); });
        b.note("bwd: hand power (f32)");
    }
};

}  // namespace

std::unique_ptr<Kernel> make_power_kernel() { return std::make_unique<PowerKernel>(); }

}  // namespace psrun::nn
