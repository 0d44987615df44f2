#include "workerd/nn/conv2d_layer.h"

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;
using Dt = memory::data_type;

Conv2dLayer::Conv2dLayer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
                         std::size_t param_offset, Options options)
    : Layer(specs, index, context, param_offset), options_(options) {}

void Conv2dLayer::build(const memory& src_in, const memory& diff_src_in) {
    const LayerSpec& s = spec();
    const memory src = as_image(src_in);
    const memory diff_src = as_image(diff_src_in);
    const Dt adt = ctx_.activation_type();
    const memory::dim n = ctx_.batch;
    const memory::dims src_dims = activation_dims(s.input, n);
    const memory::dims dst_dims = activation_dims(s.output, n);
    const memory::dims w_dims{s.filters, s.input.channels, s.kernel.h, s.kernel.w};
    const memory::dims b_dims{s.filters};
    const memory::dims strides{s.stride.h, s.stride.w};
    const memory::dims pad_l{s.pads.top, s.pads.left}, pad_r{s.pads.bottom, s.pads.right};
    const auto src_any = md(src_dims, adt, Tag::any), dst_any = md(dst_dims, adt, options_.dst_format);
    const auto w_any = md(w_dims, adt, Tag::any);
    const auto b_md = md(b_dims, Dt::f32, Tag::x);
    const auto prop = ctx_.training ? prop_kind::forward_training : prop_kind::forward_inference;

    auto fwd_desc = s.bias ? convolution_forward::desc(prop, algorithm::convolution_direct, src_any, w_any,
                                                       b_md, dst_any, strides, pad_l, pad_r)
                           : convolution_forward::desc(prop, algorithm::convolution_direct, src_any, w_any,
                                                       dst_any, strides, pad_l, pad_r);
    convolution_forward::primitive_desc pd(fwd_desc, fused_relu_attr(), ctx_.engine);
    note("fwd", pd);
    const memory conv_src = convert(fwd_ops_, src, pd.src_desc());
    const memory weights = convert(fwd_ops_, param(0, w_dims, Tag::oihw), pd.weights_desc());
    allocate_output(pd.dst_desc());
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, conv_src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst_}};
    if (s.bias) args.emplace(DNNL_ARG_BIAS, param(1, b_dims, Tag::x));
    add(fwd_ops_, convolution_forward(pd), args);
    if (!ctx_.training) return;

    Ops& ops = bwd_ops_;
    if (fused_relu() && !options_.relu_backward_by_consumer) add_fused_relu_backward(ops);

    const auto dw_any = md(w_dims, Dt::f32, Tag::any);
    auto bw_desc = s.bias ? convolution_backward_weights::desc(algorithm::convolution_direct, src_any, dw_any,
                                                               b_md, dst_any, strides, pad_l, pad_r)
                          : convolution_backward_weights::desc(algorithm::convolution_direct, src_any, dw_any,
                                                               dst_any, strides, pad_l, pad_r);
    convolution_backward_weights::primitive_desc bw_pd(bw_desc, ctx_.engine, pd);
    note("bwd-w", bw_pd);
    Ops after;
    const memory bw_src = convert(ops, conv_src, bw_pd.src_desc());
    const memory bw_ddst = convert(ops, diff_dst_, bw_pd.diff_dst_desc());
    const memory dw = produce_into(after, grad(0, w_dims, Tag::oihw), bw_pd.diff_weights_desc());
    std::unordered_map<int, memory> bw_args{
        {DNNL_ARG_SRC, bw_src}, {DNNL_ARG_DIFF_DST, bw_ddst}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
    if (s.bias) bw_args.emplace(DNNL_ARG_DIFF_BIAS, grad(1, b_dims, Tag::x));
    add(ops, convolution_backward_weights(bw_pd), bw_args);
    ops.insert(ops.end(), after.begin(), after.end());
    if (!diff_src) return;

    convolution_backward_data::primitive_desc bd_pd(
        convolution_backward_data::desc(algorithm::convolution_direct, src_any, w_any, dst_any,
                                        strides, pad_l, pad_r),
        ctx_.engine, pd);
    note("bwd-d", bd_pd);
    after.clear();
    const memory bd_w = convert(ops, weights, bd_pd.weights_desc());
    const memory bd_ddst = convert(ops, diff_dst_, bd_pd.diff_dst_desc());
    const memory dsrc = produce_into(after, diff_src, bd_pd.diff_src_desc());
    add(ops, convolution_backward_data(bd_pd),
        {{DNNL_ARG_DIFF_DST, bd_ddst}, {DNNL_ARG_WEIGHTS, bd_w}, {DNNL_ARG_DIFF_SRC, dsrc}});
    ops.insert(ops.end(), after.begin(), after.end());
}

}  // namespace psrun::nn
