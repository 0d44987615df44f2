// The resize kernel: oneDNN's resampling (nearest or linear) from the input's dims to the
// output's (the factors out / in), on the input as its producer left it.
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;

namespace {

class ResizeKernel final : public Kernel {
  public:
    // Backward reads nothing of the forward's: oneDNN's resampling backward takes dY alone.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    void build(KernelBuilder& b) override {
        const bool linear = b.node().attrs.at("mode").get<std::string>() == "linear";
        const algorithm alg = linear ? algorithm::resampling_linear : algorithm::resampling_nearest;
        const auto adt = b.context().activation_type();
        memory src = b.input(0);
        if (src.get_desc().data_type() != adt) src = b.input_plain(0, adt);
        const memory::desc dst_any(b.output_dims(0), adt, Tag::any);
        const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
        resampling_forward::primitive_desc pd(resampling_forward::desc(prop, alg, src.get_desc(), dst_any),
                                              b.context().engine);
        b.note("fwd", pd);
        const memory dst = b.make_output(0, pd.dst_desc());
        b.forward(resampling_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
        if (!b.needs_input_grad(0)) return;
        resampling_backward::primitive_desc bd(resampling_backward::desc(alg, src.get_desc(), dst.get_desc()),
                                               b.context().engine, pd);
        b.note("bwd", bd);
        const memory ddst = b.output_diff(0, dst.get_desc());
        const memory dsrc = b.input_diff(0, bd.diff_src_desc());
        b.backward(resampling_backward(bd), {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dsrc}});
    }
};

}  // namespace

std::unique_ptr<Kernel> make_resize_kernel() { return std::make_unique<ResizeKernel>(); }

}  // namespace psrun::nn
