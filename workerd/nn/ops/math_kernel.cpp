// pow on oneDNN's eltwise (square for the exponent 2, pow otherwise), forward and backward;
// the functions of hand_math.h by hand (oneDNN 2.6's eltwise has none of them): y = f(x),
// dx = dy * f'(x) (hand_eltwise.h).
#include <cmath>
#include <memory>
#include <stdexcept>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/hand_eltwise.h"
#include "workerd/nn/ops/hand_math.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

class PowKernel final : public Kernel {
  public:
    // Backward reads the input (oneDNN's eltwise backward from src), not the output.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads{BackwardReads::kAllInputs, false};
    }

    void build(KernelBuilder& b) override {
        const float e = static_cast<float>(b.node().attrs.at("exponent").get<double>());
        const algorithm alg = e == 2.0f ? algorithm::eltwise_square : algorithm::eltwise_pow;
        const float alpha = 1.0f, beta = e;
        const auto adt = b.context().activation_type();
        memory src = b.input(0);
        if (src.get_desc().data_type() != adt) src = b.input_plain(0, adt);
        const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
        eltwise_forward::primitive_desc pd(eltwise_forward::desc(prop, alg, src.get_desc(), alpha, beta),
                                           b.context().engine);
        b.note("fwd", pd);
        const memory dst = b.make_output(0, pd.dst_desc());
        b.forward(eltwise_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
        if (!b.needs_input_grad(0)) return;
        const memory ddst = b.output_diff(0, dst.get_desc());
        eltwise_backward::primitive_desc bd(eltwise_backward::desc(alg, ddst.get_desc(), src.get_desc(), alpha, beta),
                                            b.context().engine, pd);
        b.note("bwd", bd);
        const memory dsrc = b.input_diff(0, bd.diff_src_desc());
        b.backward(eltwise_backward(bd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dsrc}});
    }
};

class HandMathKernel final : public Kernel {
  public:
    // Backward reads the input, not the output.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads{BackwardReads::kAllInputs, false};
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const HandMathFunction* math = find_hand_math(b.node().op);
        if (math == nullptr) throw std::logic_error("no hand math function for kind " + b.node().op);
        const auto f = math->forward;
        const auto slope = math->slope;
        build_hand_eltwise(
            b, [f](std::int64_t, float v) { return f(v); }, [slope](std::int64_t, float v) { return slope(v); });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_pow_kernel() { return std::make_unique<PowKernel>(); }
std::unique_ptr<Kernel> make_hand_math_kernel() { return std::make_unique<HandMathKernel>(); }

}  // namespace psrun::nn
