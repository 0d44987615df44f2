// The activation kernels: oneDNN's eltwise forward and backward on the input as its producer
// left it (converted only to the activation type); the backward reads the output where the
// function allows (relu, tanh, sigmoid, elu, exp, sqrt, clip), else the input.
#include <memory>
#include <stdexcept>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/activation.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;

namespace {

struct Eltwise {
    algorithm alg;
    float alpha = 0.0f, beta = 0.0f;
    bool use_dst = false;
};

Eltwise eltwise_of(const Node& node) {
    const Activation* a = find_activation(node.op);
    if (a == nullptr) throw std::logic_error(node.op + " is not an activation");
    auto number = [&](const char* key) { return static_cast<float>(node.attrs.at(key).get<double>()); };
    switch (*a) {
        case Activation::kRelu: return {algorithm::eltwise_relu_use_dst_for_bwd, 0, 0, true};
        case Activation::kTanh: return {algorithm::eltwise_tanh_use_dst_for_bwd, 0, 0, true};
        case Activation::kSigmoid: return {algorithm::eltwise_logistic_use_dst_for_bwd, 0, 0, true};
        case Activation::kLeakyRelu: return {algorithm::eltwise_relu, number("alpha"), 0, false};
        case Activation::kElu: {
            const float alpha = number("alpha");
            // elu's dst-based backward needs alpha >= 0.
            return alpha >= 0 ? Eltwise{algorithm::eltwise_elu_use_dst_for_bwd, alpha, 0, true}
                              : Eltwise{algorithm::eltwise_elu, alpha, 0, false};
        }
        case Activation::kClip: return {algorithm::eltwise_clip_v2_use_dst_for_bwd, number("min"), number("max"), true};
        case Activation::kGelu:
        case Activation::kGeluTanh:
            return {node.attrs.at("approximate") == "tanh" ? algorithm::eltwise_gelu_tanh : algorithm::eltwise_gelu_erf};
        case Activation::kExp: return {algorithm::eltwise_exp_use_dst_for_bwd, 0, 0, true};
        case Activation::kLog: return {algorithm::eltwise_log};
        case Activation::kSqrt: return {algorithm::eltwise_sqrt_use_dst_for_bwd, 0, 0, true};
        case Activation::kAbs: return {algorithm::eltwise_abs};
        case Activation::kSoftplus: return {algorithm::eltwise_soft_relu};
        case Activation::kSwish: return {algorithm::eltwise_swish, 1.0f, 0, false};
        case Activation::kHardSwish: return {algorithm::eltwise_hardswish};
        case Activation::kNeg: return {algorithm::eltwise_linear, -1.0f, 0, false};
    }
    throw std::logic_error("unknown activation");
}

class ActivationKernel final : public Kernel {
public:
    void build(KernelBuilder& b) override {
        const Eltwise e = eltwise_of(b.node());
        const auto adt = b.context().activation_type();
        memory src = b.input(0);
        if (src.get_desc().data_type() != adt) src = b.input_plain(0, adt);
        const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
        eltwise_forward::primitive_desc pd(eltwise_forward::desc(prop, e.alg, src.get_desc(), e.alpha, e.beta),
                                           b.context().engine);
        b.note("fwd", pd);
        const memory dst = b.make_output(0, pd.dst_desc());
        b.forward(eltwise_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
        if (!b.needs_input_grad(0)) return;
        const memory ddst = b.output_diff(0, dst.get_desc());
        eltwise_backward::primitive_desc bd(
            eltwise_backward::desc(e.alg, ddst.get_desc(), e.use_dst ? dst.get_desc() : src.get_desc(), e.alpha, e.beta),
            b.context().engine, pd);
        b.note("bwd", bd);
        const memory dsrc = b.input_diff(0, bd.diff_src_desc());
        b.backward(eltwise_backward(bd), {{e.use_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, e.use_dst ? dst : src},
                                          {DNNL_ARG_DIFF_DST, ddst},
                                          {DNNL_ARG_DIFF_SRC, dsrc}});
    }
};

}  // namespace

std::unique_ptr<Kernel> make_activation_kernel() { return std::make_unique<ActivationKernel>(); }

}  // namespace psrun::nn
