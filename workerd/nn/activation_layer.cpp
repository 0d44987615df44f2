#include "workerd/nn/activation_layer.h"

#include <stdexcept>

namespace psrun::nn {

using namespace dnnl;

namespace {

algorithm use_dst_algorithm(LayerKind kind) {
    switch (kind) {
        case LayerKind::kRelu: return algorithm::eltwise_relu_use_dst_for_bwd;
        case LayerKind::kTanh: return algorithm::eltwise_tanh_use_dst_for_bwd;
        case LayerKind::kSigmoid: return algorithm::eltwise_logistic_use_dst_for_bwd;
        default: throw std::logic_error("not an activation kind");
    }
}

}  // namespace

void ActivationLayer::build(const memory& src_in, const memory& diff_src) {
    const algorithm alg = use_dst_algorithm(kind());
    memory src = src_in;
    const auto adt = ctx_.activation_type();
    if (src.get_desc().data_type() != adt) {
        const auto dims = src.get_desc().dims();
        src = convert(fwd_ops_, src_in, md(dims, adt, plain_tag(static_cast<int>(dims.size()))));
    }
    const auto prop = ctx_.training ? prop_kind::forward_training : prop_kind::forward_inference;
    eltwise_forward::primitive_desc pd(eltwise_forward::desc(prop, alg, src.get_desc(), 0.0f, 0.0f),
                                       ctx_.engine);
    note("fwd", pd);
    allocate_output(pd.dst_desc());
    add(fwd_ops_, eltwise_forward(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst_}});
    if (!ctx_.training || !diff_src) return;

    eltwise_backward::primitive_desc bd_pd(
        eltwise_backward::desc(alg, src.get_desc(), dst_.get_desc(), 0.0f, 0.0f), ctx_.engine, pd);
    note("bwd", bd_pd);
    Ops after;
    const memory dsrc = produce_into(after, diff_src, bd_pd.diff_src_desc());
    add(bwd_ops_, eltwise_backward(bd_pd),
        {{DNNL_ARG_DST, dst_}, {DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_SRC, dsrc}});
    bwd_ops_.insert(bwd_ops_.end(), after.begin(), after.end());
}

}  // namespace psrun::nn
