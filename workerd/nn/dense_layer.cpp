#include "workerd/nn/dense_layer.h"

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;
using Dt = memory::data_type;

DenseLayer::DenseLayer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
                       std::size_t param_offset, memory::data_type output_type)
    : Layer(specs, index, context, param_offset), output_type_(output_type) {}

void DenseLayer::build(const memory& src_in, const memory& diff_src_in) {
    const LayerSpec& s = spec();
    const Dt adt = ctx_.activation_type();
    const memory::dim n = ctx_.batch, fin = s.input.elements(), units = s.units;
    const auto src2_md = md({n, fin}, adt, Tag::nc);
    const bool image = src_in.get_desc().dims().size() == 4;
    // The source as {N, in_features} in NHWC flattening order.
    memory src2;
    memory::desc nhwc_md;
    if (image) {
        nhwc_md = md(activation_dims(s.input, n), adt, Tag::nhwc);
        const memory src4 = convert(fwd_ops_, src_in, nhwc_md);
        src2 = memory(src2_md, ctx_.engine, src4.get_data_handle());
    } else {
        src2 = convert(fwd_ops_, src_in, src2_md);
    }
    const memory::dims w_dims{units, fin}, b_dims{units};
    const auto w_md = md(w_dims, adt, adt == Dt::f32 ? Tag::oi : Tag::any);
    const auto b_md = md(b_dims, Dt::f32, Tag::x);
    const auto dst_md = md({n, units}, output_type_, Tag::nc);
    const auto prop = ctx_.training ? prop_kind::forward_training : prop_kind::forward_inference;
    auto fwd_desc = s.bias ? inner_product_forward::desc(prop, src2_md, w_md, b_md, dst_md)
                           : inner_product_forward::desc(prop, src2_md, w_md, dst_md);
    inner_product_forward::primitive_desc pd(fwd_desc, fused_relu_attr(), ctx_.engine);
    note("fwd", pd);
    const memory weights = convert(fwd_ops_, param(0, w_dims, Tag::oi), pd.weights_desc());
    allocate_output(pd.dst_desc());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src2}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst_}};
    if (s.bias) args.emplace(DNNL_ARG_BIAS, param(1, b_dims, Tag::x));
    add(fwd_ops_, inner_product_forward(pd), args);
    if (!ctx_.training) return;

    Ops& ops = bwd_ops_;
    if (fused_relu()) add_fused_relu_backward(ops);
    // The gradient w.r.t. dst in the activation type (the logits may be f32 in bf16 mode).
    const memory ddst = convert(ops, diff_dst_, md({n, units}, adt, Tag::nc));
    const auto dw_md = md(w_dims, Dt::f32, adt == Dt::f32 ? Tag::oi : Tag::any);
    auto bw_desc = s.bias ? inner_product_backward_weights::desc(src2_md, dw_md, b_md, ddst.get_desc())
                          : inner_product_backward_weights::desc(src2_md, dw_md, ddst.get_desc());
    inner_product_backward_weights::primitive_desc bw_pd(bw_desc, ctx_.engine, pd);
    note("bwd-w", bw_pd);
    Ops after;
    const memory dw = produce_into(after, grad(0, w_dims, Tag::oi), bw_pd.diff_weights_desc());
    std::unordered_map<int, memory> bw_args{
        {DNNL_ARG_SRC, src2}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
    if (s.bias) bw_args.emplace(DNNL_ARG_DIFF_BIAS, grad(1, b_dims, Tag::x));
    add(ops, inner_product_backward_weights(bw_pd), bw_args);
    ops.insert(ops.end(), after.begin(), after.end());
    if (!diff_src_in) return;

    inner_product_backward_data::primitive_desc bd_pd(
        inner_product_backward_data::desc(src2_md, weights.get_desc(), ddst.get_desc()),
        ctx_.engine, pd);
    note("bwd-d", bd_pd);
    after.clear();
    memory dsrc2;
    if (image) {
        const memory dsrc4 = produce_into(after, diff_src_in, nhwc_md);
        dsrc2 = memory(src2_md, ctx_.engine, dsrc4.get_data_handle());
    } else {
        dsrc2 = produce_into(after, diff_src_in, src2_md);
    }
    add(ops, inner_product_backward_data(bd_pd),
        {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DIFF_SRC, dsrc2}});
    ops.insert(ops.end(), after.begin(), after.end());
}

}  // namespace psrun::nn
