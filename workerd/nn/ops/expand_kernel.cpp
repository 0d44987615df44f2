// The expand kernel: a reorder from a zero-stride view of the input (plain, the activation
// type) into the output; backward: dY (f32) summed over the broadcast axes into dX (sum_to).
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

class ExpandKernel final : public Kernel {
  public:
    // Backward reads nothing of the forward's: dY summed over the broadcast axes.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const MemDims out = b.output_dims(0);
        const MemDims in = padded(b.input_dims(0), out.size());
        const Dt type = b.output_type(0);
        const memory src = b.input_plain(0, type);
        const View spread = view_of(src, broadcast_desc(in, out, type), engine);
        const memory dst = b.make_output(0, plain_desc(out, type));
        b.forward(run_reorder(b, spread.view, dst, {spread}));
        b.note("fwd: reorder from a broadcast view");
        if (!b.needs_input_grad(0)) return;
        const memory dy = b.output_diff(0, plain_desc(out, Dt::f32));
        b.backward(sum_to(b, dy, b.input_diff(0, plain_desc(b.input_dims(0), Dt::f32)), in));
    }
};

}  // namespace

std::unique_ptr<Kernel> make_expand_kernel() { return std::make_unique<ExpandKernel>(); }

}  // namespace psrun::nn
