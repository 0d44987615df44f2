// reduce_mean and reduce_sum on oneDNN's reduction primitive (plain layouts, the activation
// type; the output's data read with the reduced dims kept as 1s). Backward (oneDNN has none):
// dX is dY broadcast back over the reduced axes (a reorder from a zero-stride view), scaled
// by 1 / count for the mean, in f32.
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

class ReduceKernel final : public Kernel {
public:
    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const auto adt = b.context().activation_type();
        const bool mean = b.node().op == "reduce_mean";
        const MemDims in = b.input_dims(0);
        MemDims kept = in;
        std::int64_t count = 1;
        for (auto a : b.node().attrs.at("axes").get<std::vector<std::int64_t>>()) {
            const auto d = static_cast<std::size_t>(a < 0 ? a + static_cast<std::int64_t>(in.size()) : a);
            count *= in[d];
            kept[d] = 1;
        }
        const memory src = b.input_plain(0, adt);
        const memory dst = b.make_output(0, plain_desc(b.output_dims(0), adt));
        const View out = view_of(dst, plain_desc(kept, adt), engine);
        reduction::primitive_desc pd(reduction::desc(mean ? algorithm::reduction_mean : algorithm::reduction_sum,
                                                     src.get_desc(), out.view.get_desc(), 0.f, 0.f),
                                     engine);
        b.note("fwd", pd);
        b.forward(run_primitive(b, reduction(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out.view}}, {out}));
        if (!b.needs_input_grad(0)) return;
        const memory dy = b.output_diff(0, plain_desc(b.output_dims(0), Dt::f32));
        const View spread = view_of(dy, broadcast_desc(kept, in, Dt::f32), engine);
        const View dx = view_of(b.input_diff(0, plain_desc(in, Dt::f32)), plain_desc(in, Dt::f32), engine);
        b.backward(run_reorder(b, spread.view, dx.view, {spread, dx}, mean ? 1.0f / static_cast<float>(count) : 1.0f));
    }
};

}  // namespace

std::unique_ptr<Kernel> make_reduce_kernel() { return std::make_unique<ReduceKernel>(); }

}  // namespace psrun::nn
