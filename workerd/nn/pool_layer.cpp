#include "workerd/nn/pool_layer.h"

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;

void PoolLayer::build(const memory& src_in, const memory& diff_src_in) {
    const LayerSpec& s = spec();
    const bool is_max = s.kind == LayerKind::kMaxPool;
    const algorithm alg = is_max ? algorithm::pooling_max : algorithm::pooling_avg_exclude_padding;
    const memory::dim n = ctx_.batch;
    const memory::dims kernel{s.kernel.h, s.kernel.w}, strides{s.stride.h, s.stride.w};
    const memory::dims pad_l{s.pads.top, s.pads.left}, pad_r{s.pads.bottom, s.pads.right};
    const auto adt = ctx_.activation_type();
    const memory src_image = as_image(src_in);
    const memory diff_src = as_image(diff_src_in);
    // Pooling takes its source as it is (in the activation type: the network input is f32).
    memory src = src_image;
    if (src.get_desc().data_type() != adt) {
        src = convert(fwd_ops_, src_image, md(activation_dims(s.input, n), adt, Tag::nchw));
    }
    const auto prop = ctx_.training ? prop_kind::forward_training : prop_kind::forward_inference;
    pooling_forward::primitive_desc pd(
        pooling_forward::desc(prop, alg, src.get_desc(), md(activation_dims(s.output, n), adt, Tag::any),
                              strides, kernel, pad_l, pad_r),
        ctx_.engine);
    note("fwd", pd);
    allocate_output(pd.dst_desc());
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst_}};
    memory workspace;
    if (is_max && ctx_.training) {
        workspace = memory(pd.workspace_desc(), ctx_.engine);
        args.emplace(DNNL_ARG_WORKSPACE, workspace);
    }
    add(fwd_ops_, pooling_forward(pd), args);
    if (!ctx_.training || !diff_src) return;

    pooling_backward::primitive_desc bd_pd(
        pooling_backward::desc(alg, src.get_desc(), dst_.get_desc(), strides, kernel, pad_l, pad_r),
        ctx_.engine, pd);
    note("bwd", bd_pd);
    Ops after;
    const memory dsrc = produce_into(after, diff_src, bd_pd.diff_src_desc());
    std::unordered_map<int, memory> bargs{{DNNL_ARG_DIFF_DST, diff_dst_}, {DNNL_ARG_DIFF_SRC, dsrc}};
    if (is_max) bargs.emplace(DNNL_ARG_WORKSPACE, workspace);
    add(bwd_ops_, pooling_backward(bd_pd), bargs);
    bwd_ops_.insert(bwd_ops_.end(), after.begin(), after.end());
}

}  // namespace psrun::nn
