// The activation kernels: oneDNN's eltwise forward and backward on the input as its producer
// left it (converted only to the activation type); the backward reads the output where the
// function allows (relu, tanh, sigmoid, elu, exp, sqrt, clip), else the input. selu and
// hard_sigmoid, which oneDNN 2.6 lacks, are two eltwise stages (elu then linear; linear then
// clip) through an intermediate memory, their backwards in reverse order; reciprocal is pow(x, -1).
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

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

// A second stage after the first (selu, hard_sigmoid).
struct Chain {
    Eltwise first;
    std::optional<Eltwise> second;
};

Eltwise eltwise_of(const Node& node);

Chain chain_of(const Node& node) {
    const Activation* a = find_activation(node.op);
    auto number = [&](const char* key) { return static_cast<float>(node.attrs.at(key).get<double>()); };
    if (a != nullptr && *a == Activation::kSelu) {
        const float alpha = number("alpha");
        const Eltwise elu = alpha >= 0 ? Eltwise{algorithm::eltwise_elu_use_dst_for_bwd, alpha, 0, true}
                                       : Eltwise{algorithm::eltwise_elu, alpha, 0, false};
        return {elu, Eltwise{algorithm::eltwise_linear, number("gamma"), 0, false}};
    }
    if (a != nullptr && *a == Activation::kHardSigmoid)
        return {Eltwise{algorithm::eltwise_linear, number("alpha"), number("beta"), false},
                Eltwise{algorithm::eltwise_clip_v2_use_dst_for_bwd, 0.0f, 1.0f, true}};
    return {eltwise_of(node), std::nullopt};
}

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
            return {node.attrs.at("approximate") == "tanh" ? algorithm::eltwise_gelu_tanh
                                                           : algorithm::eltwise_gelu_erf};
        case Activation::kExp: return {algorithm::eltwise_exp_use_dst_for_bwd, 0, 0, true};
        case Activation::kLog: return {algorithm::eltwise_log};
        case Activation::kSqrt: return {algorithm::eltwise_sqrt_use_dst_for_bwd, 0, 0, true};
        case Activation::kAbs: return {algorithm::eltwise_abs};
        case Activation::kSoftplus: return {algorithm::eltwise_soft_relu};
        case Activation::kSwish: return {algorithm::eltwise_swish, 1.0f, 0, false};
        case Activation::kHardSwish: return {algorithm::eltwise_hardswish};
        case Activation::kNeg: return {algorithm::eltwise_linear, -1.0f, 0, false};
        case Activation::kMish: return {algorithm::eltwise_mish};
        case Activation::kReciprocal: return {algorithm::eltwise_pow, 1.0f, -1.0f, false};
        case Activation::kSelu:
        case Activation::kHardSigmoid: break;  // chain_of
    }
    throw std::logic_error("unknown activation");
}

// One eltwise stage: forward src -> dst, backward ddst -> dsrc.
struct Stage {
    eltwise_forward::primitive_desc fwd;
    memory src, dst;
};

class ActivationKernel final : public Kernel {
  public:
    // One stage: its output where oneDNN's backward uses dst (relu, tanh, sigmoid, ...), which
    // may then overwrite its input, else its input. Two stages: everything.
    BackwardReads backward_reads(const std::vector<const Node*>& nodes, const EngineContext&) const override {
        const Chain c = chain_of(*nodes.front());
        BackwardReads reads;
        if (!c.second)
            reads = c.first.use_dst ? BackwardReads{0, true, 0} : BackwardReads{BackwardReads::kAllInputs, false, -1};
        reads.keeps_output_grad = true;  // eltwise backward writes dX apart from dY
        reads.grad_over_output = 0b1;    // or over it (oneDNN's eltwise backward runs in place)
        return reads;
    }

    void build(KernelBuilder& b) override {
        const Chain c = chain_of(b.node());
        const auto adt = b.context().activation_type();
        memory src = b.input(0);
        if (src.get_desc().data_type() != adt) src = b.input_plain(0, adt);
        std::vector<Stage> stages;
        const Stage first = forward_stage(b, c.first, src, !c.second.has_value(), "fwd");
        stages.push_back(first);
        if (c.second) stages.push_back(forward_stage(b, *c.second, first.dst, true, "fwd 2"));
        if (!b.needs_input_grad(0)) return;
        const memory ddst = b.output_diff(0, stages.back().dst.get_desc());
        memory diff = ddst;
        for (std::size_t k = stages.size(); k-- > 0;) {
            const Eltwise& e = k == 0 ? c.first : *c.second;
            const Stage& s = stages[k];
            eltwise_backward::primitive_desc bd(
                eltwise_backward::desc(e.alg, diff.get_desc(), e.use_dst ? s.dst.get_desc() : s.src.get_desc(), e.alpha,
                                       e.beta),
                b.context().engine, s.fwd);
            b.note(k == 0 ? "bwd" : "bwd 2", bd);
            const memory dsrc =
                k == 0 ? b.input_diff(0, bd.diff_src_desc()) : memory(bd.diff_src_desc(), b.context().engine);
            b.backward(eltwise_backward(bd), {{e.use_dst ? DNNL_ARG_DST : DNNL_ARG_SRC, e.use_dst ? s.dst : s.src},
                                              {DNNL_ARG_DIFF_DST, diff},
                                              {DNNL_ARG_DIFF_SRC, dsrc}});
            diff = dsrc;
        }
    }

  private:
    // The forward of `e` on `src`, into the output when `last`, else into a new memory.
    static Stage forward_stage(KernelBuilder& b, const Eltwise& e, const memory& src, bool last, const char* what) {
        const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
        eltwise_forward::primitive_desc pd(eltwise_forward::desc(prop, e.alg, src.get_desc(), e.alpha, e.beta),
                                           b.context().engine);
        b.note(what, pd);
        const memory dst = last ? b.make_output(0, pd.dst_desc()) : memory(pd.dst_desc(), b.context().engine);
        b.forward(eltwise_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}});
        return {pd, src, dst};
    }
};

}  // namespace

std::unique_ptr<Kernel> make_activation_kernel() { return std::make_unique<ActivationKernel>(); }

}  // namespace psrun::nn
