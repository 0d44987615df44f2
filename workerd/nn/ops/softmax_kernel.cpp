// softmax and log_softmax on oneDNN's softmax and logsoftmax primitives, forward and backward
// (both read the output), on the plain layout of the input in the activation type. The
// attribute's axis is resolved against the input's rank here.
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;

namespace {

// Forward and backward of one primitive family (softmax_* or logsoftmax_*).
template <typename Fwd, typename Bwd>
void build_family(KernelBuilder& b) {
    const auto& engine = b.context().engine;
    const int axis = axis_attr(b);
    const memory src = b.input_plain(0, b.context().activation_type());
    const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
    typename Fwd::primitive_desc pd(typename Fwd::desc(prop, src.get_desc(), axis), engine);
    b.note("fwd", pd);
    const memory dst = b.make_output(0, pd.dst_desc());
    b.forward(Fwd(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
    if (!b.needs_input_grad(0)) return;
    const memory ddst = b.output_diff(0, dst.get_desc());
    typename Bwd::primitive_desc bd(typename Bwd::desc(ddst.get_desc(), dst.get_desc(), axis), engine, pd);
    b.note("bwd", bd);
    const memory dsrc = b.input_diff(0, bd.diff_src_desc());
    b.backward(Bwd(bd), {{DNNL_ARG_DST, dst}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dsrc}});
}

class SoftmaxKernel final : public Kernel {
  public:
    // The output only; oneDNN's softmax may write it over its input.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads{0, true, 0};
        reads.keeps_output_grad = true;
        return reads;
    }

    void build(KernelBuilder& b) override {
        if (b.node().op == "softmax") build_family<softmax_forward, softmax_backward>(b);
        else build_family<logsoftmax_forward, logsoftmax_backward>(b);
    }
};

}  // namespace

std::unique_ptr<Kernel> make_softmax_kernel() { return std::make_unique<SoftmaxKernel>(); }

}  // namespace psrun::nn
