// Model construction, backward pass: gradients of every parameter, written in plain layouts
// into the ParameterSet of gradients. conv1's gradient w.r.t. its input is never computed.
#include "workerd/model_impl.h"

namespace psrun::worker {

using namespace dnnl;
using alg = dnnl::algorithm;

namespace {

// ReLU backward from the forward output (dst > 0), applied in place on `diff`.
eltwise_backward relu_backward(const engine& eng, const memory::desc& data,
                               eltwise_backward::primitive_desc& pd_out) {
    eltwise_forward::primitive_desc hint(
        eltwise_forward::desc(prop_kind::forward_training, alg::eltwise_relu_use_dst_for_bwd, data,
                              0.0f, 0.0f),
        eng);
    pd_out = eltwise_backward::primitive_desc(
        eltwise_backward::desc(alg::eltwise_relu_use_dst_for_bwd, data, data, 0.0f, 0.0f), eng,
        hint);
    return eltwise_backward(pd_out);
}

}  // namespace

memory Model::Impl::grad(const memory::dims& dims, Tag tag, int i) {
    memory m = wrap(dims, tag, grads.tensor(i).data());
    grad_memories.emplace_back(m, i);
    return m;
}

void Model::Impl::build_backward() {
    const auto& s = cfg.shape;
    const memory::dim n = cfg.batch_size, h = s.height, w = s.width, k = s.kernel, pad = k / 2;
    const memory::dim c1 = s.conv1_channels, c2 = s.conv2_channels, f = s.fc1_units;
    const memory::dim z = s.classes, fin = s.flat_features();
    const memory::dims one{1, 1}, pads{pad, pad}, two{2, 2}, zero{0, 0};
    auto& ops = bwd_ops;

    // fc2: dlogits (written by the loss step) -> weights/bias gradients and d(fc1 output).
    inner_product_backward_weights::primitive_desc fc2_bw_pd(
        inner_product_backward_weights::desc(md({n, f}, adt, Tag::nc), md({z, f}, Dt::f32, Tag::oi),
                                             md({z}, Dt::f32, Tag::x), md({n, z}, adt, Tag::nc)),
        eng, fc2_pd);
    std::vector<Op> after;
    memory fc2_dw = produce_into(after, Layer::kFc2, grad({z, f}, Tag::oi, 6),
                                 fc2_bw_pd.diff_weights_desc());
    add(ops, Layer::kFc2, inner_product_backward_weights(fc2_bw_pd),
        {{DNNL_ARG_SRC, fc1_dst}, {DNNL_ARG_DIFF_DST, dlogits}, {DNNL_ARG_DIFF_WEIGHTS, fc2_dw},
         {DNNL_ARG_DIFF_BIAS, grad({z}, Tag::x, 7)}});
    ops.insert(ops.end(), after.begin(), after.end());
    after.clear();
    inner_product_backward_data::primitive_desc fc2_bd_pd(
        inner_product_backward_data::desc(md({n, f}, adt, Tag::nc), fc2_weights.get_desc(),
                                          md({n, z}, adt, Tag::nc)),
        eng, fc2_pd);
    d_fc1_dst = memory(fc2_bd_pd.diff_src_desc(), eng);
    add(ops, Layer::kFc2, inner_product_backward_data(fc2_bd_pd),
        {{DNNL_ARG_DIFF_DST, dlogits}, {DNNL_ARG_WEIGHTS, fc2_weights},
         {DNNL_ARG_DIFF_SRC, d_fc1_dst}});

    // Dropout and fc1's ReLU in one loop.
    ops.push_back(Op{Layer::kDropout, [this] { run_dropout_backward(); }});

    // fc1.
    inner_product_backward_weights::primitive_desc fc1_bw_pd(
        inner_product_backward_weights::desc(md({n, fin}, adt, Tag::nc),
                                             md({f, fin}, Dt::f32,
                                                cfg.fc1_blocked() ? Tag::any : Tag::oi),
                                             md({f}, Dt::f32, Tag::x), d_fc1_dst.get_desc()),
        eng, fc1_pd);
    memory fc1_dw = produce_into(after, Layer::kFc1, grad({f, fin}, Tag::oi, 4),
                                 fc1_bw_pd.diff_weights_desc());
    add(ops, Layer::kFc1, inner_product_backward_weights(fc1_bw_pd),
        {{DNNL_ARG_SRC, fc1_src}, {DNNL_ARG_DIFF_DST, d_fc1_dst}, {DNNL_ARG_DIFF_WEIGHTS, fc1_dw},
         {DNNL_ARG_DIFF_BIAS, grad({f}, Tag::x, 5)}});
    ops.insert(ops.end(), after.begin(), after.end());
    after.clear();
    inner_product_backward_data::primitive_desc fc1_bd_pd(
        inner_product_backward_data::desc(md({n, fin}, adt, Tag::nc), fc1_weights.get_desc(),
                                          d_fc1_dst.get_desc()),
        eng, fc1_pd);
    memory d_fc1_src(fc1_bd_pd.diff_src_desc(), eng);
    d_fc1_src_4d = memory(md({n, c2, h / 4, w / 4}, adt, Tag::nhwc), eng,
                          d_fc1_src.get_data_handle());
    add(ops, Layer::kFc1, inner_product_backward_data(fc1_bd_pd),
        {{DNNL_ARG_DIFF_DST, d_fc1_dst}, {DNNL_ARG_WEIGHTS, fc1_weights},
         {DNNL_ARG_DIFF_SRC, d_fc1_src}});

    // pool2 backward: d(pool2 dst) in pool2's format -> d(conv2 dst) in conv2's format.
    d_pool2_dst = convert(ops, Layer::kPool2, d_fc1_src_4d, pool2_dst.get_desc());
    // conv2's ReLU backward, applied before the pool on the 4x smaller tensor: the pool routes
    // each gradient to its window's maximum, which is > 0 exactly when the pool output is > 0,
    // so relu'(conv2) * pool_bwd(d) == pool_bwd(d * [pool2 dst > 0]).
    d_conv2_dst = memory(conv2_dst.get_desc(), eng);
    if (pool2) {  // both in one pass
        ops.push_back(Op{Layer::kPool2, [this] {
                             pool2->backward(
                                 static_cast<const float*>(d_pool2_dst.get_data_handle()),
                                 static_cast<const float*>(pool2_dst.get_data_handle()),
                                 static_cast<float*>(d_conv2_dst.get_data_handle()));
                         }});
    } else {
        eltwise_backward::primitive_desc relu2_pd;
        add(ops, Layer::kConv2, relu_backward(eng, pool2_dst.get_desc(), relu2_pd),
            {{DNNL_ARG_DST, pool2_dst}, {DNNL_ARG_DIFF_DST, d_pool2_dst},
             {DNNL_ARG_DIFF_SRC, d_pool2_dst}});
        pooling_backward::primitive_desc pool2_b_pd(
            pooling_backward::desc(alg::pooling_max, conv2_dst.get_desc(), pool2_dst.get_desc(),
                                   two, two, zero, zero),
            eng, pool2_pd);
        add(ops, Layer::kPool2, pooling_backward(pool2_b_pd),
            {{DNNL_ARG_DIFF_DST, d_pool2_dst}, {DNNL_ARG_WORKSPACE, pool2_ws},
             {DNNL_ARG_DIFF_SRC, d_conv2_dst}});
        pds.emplace_back("relu2 bwd", relu2_pd);
    }

    // conv2: weights/bias and data gradients.
    convolution_backward_weights::primitive_desc conv2_bw_pd(
        convolution_backward_weights::desc(
            alg::convolution_direct, md({n, c1, h / 2, w / 2}, adt, Tag::any),
            md({c2, c1, k, k}, Dt::f32, Tag::any), md({c2}, Dt::f32, Tag::x),
            md({n, c2, h / 2, w / 2}, adt, Tag::any), one, pads, pads),
        eng, conv2_pd);
    memory conv2_bw_src = convert(ops, Layer::kConv2, conv2_src, conv2_bw_pd.src_desc());
    memory conv2_bw_ddst = convert(ops, Layer::kConv2, d_conv2_dst, conv2_bw_pd.diff_dst_desc());
    memory conv2_dw = produce_into(after, Layer::kConv2, grad({c2, c1, k, k}, Tag::oihw, 2),
                                   conv2_bw_pd.diff_weights_desc());
    add(ops, Layer::kConv2, convolution_backward_weights(conv2_bw_pd),
        {{DNNL_ARG_SRC, conv2_bw_src}, {DNNL_ARG_DIFF_DST, conv2_bw_ddst},
         {DNNL_ARG_DIFF_WEIGHTS, conv2_dw}, {DNNL_ARG_DIFF_BIAS, grad({c2}, Tag::x, 3)}});
    ops.insert(ops.end(), after.begin(), after.end());
    after.clear();
    convolution_backward_data::primitive_desc conv2_bd_pd(
        convolution_backward_data::desc(alg::convolution_direct,
                                        md({n, c1, h / 2, w / 2}, adt, Tag::any),
                                        md({c2, c1, k, k}, adt, Tag::any),
                                        md({n, c2, h / 2, w / 2}, adt, Tag::any), one, pads, pads),
        eng, conv2_pd);
    memory conv2_bd_w = convert(ops, Layer::kConv2, conv2_weights, conv2_bd_pd.weights_desc());
    memory conv2_bd_ddst = convert(ops, Layer::kConv2, d_conv2_dst, conv2_bd_pd.diff_dst_desc());
    memory conv2_dsrc(conv2_bd_pd.diff_src_desc(), eng);
    add(ops, Layer::kConv2, convolution_backward_data(conv2_bd_pd),
        {{DNNL_ARG_DIFF_DST, conv2_bd_ddst}, {DNNL_ARG_WEIGHTS, conv2_bd_w},
         {DNNL_ARG_DIFF_SRC, conv2_dsrc}});

    d_pool1_dst = convert(ops, Layer::kPool1, conv2_dsrc, pool1_dst.get_desc());
    if (conv1_pool) {
        // pool1, conv1's ReLU and conv1's weight gradient in one pass (workerd/nn/kernels/conv1_pool.h).
        const memory dw = grad({c1, 1, k, k}, Tag::oihw, 0), db = grad({c1}, Tag::x, 1);
        ops.push_back(Op{Layer::kConv1, [this, dw, db] {
                             conv1_pool->backward(
                                 static_cast<const float*>(d_pool1_dst.get_data_handle()),
                                 static_cast<const float*>(pool1_dst.get_data_handle()),
                                 static_cast<float*>(dw.get_data_handle()),
                                 static_cast<float*>(db.get_data_handle()));
                         }});
    } else {
        build_conv1_pool1_backward();
    }

    pds.emplace_back("fc2 bwd-w", fc2_bw_pd);
    pds.emplace_back("fc2 bwd-d", fc2_bd_pd);
    pds.emplace_back("fc1 bwd-w", fc1_bw_pd);
    pds.emplace_back("fc1 bwd-d", fc1_bd_pd);
    pds.emplace_back("conv2 bwd-w", conv2_bw_pd);
    pds.emplace_back("conv2 bwd-d", conv2_bd_pd);
}

// pool1 and conv1 backward as oneDNN primitives (the unfused first layer): conv1's ReLU backward
// on the pooled gradient, the pool's scatter, conv1's weight and bias gradients.
void Model::Impl::build_conv1_pool1_backward() {
    const auto& s = cfg.shape;
    const memory::dim n = cfg.batch_size, h = s.height, w = s.width, k = s.kernel, pad = k / 2;
    const memory::dim c1 = s.conv1_channels;
    const memory::dims one{1, 1}, pads{pad, pad}, two{2, 2}, zero{0, 0};
    auto& ops = bwd_ops;
    std::vector<Op> after;
    eltwise_backward::primitive_desc relu1_pd;  // conv1's ReLU, before the pool as for conv2
    add(ops, Layer::kConv1, relu_backward(eng, pool1_dst.get_desc(), relu1_pd),
        {{DNNL_ARG_DST, pool1_dst}, {DNNL_ARG_DIFF_DST, d_pool1_dst},
         {DNNL_ARG_DIFF_SRC, d_pool1_dst}});
    pooling_backward::primitive_desc pool1_b_pd(
        pooling_backward::desc(alg::pooling_max, conv1_dst.get_desc(), pool1_dst.get_desc(), two,
                               two, zero, zero),
        eng, pool1_pd);
    d_conv1_dst = memory(conv1_dst.get_desc(), eng);
    add(ops, Layer::kPool1, pooling_backward(pool1_b_pd),
        {{DNNL_ARG_DIFF_DST, d_pool1_dst}, {DNNL_ARG_WORKSPACE, pool1_ws},
         {DNNL_ARG_DIFF_SRC, d_conv1_dst}});

    // conv1: weights/bias gradients only.
    convolution_backward_weights::primitive_desc conv1_bw_pd(
        convolution_backward_weights::desc(
            alg::convolution_direct, md({n, 1, h, w}, adt, Tag::any),
            md({c1, 1, k, k}, Dt::f32, Tag::any), md({c1}, Dt::f32, Tag::x),
            md({n, c1, h, w}, adt, Tag::any), one, pads, pads),
        eng, conv1_pd);
    memory conv1_bw_src = convert(ops, Layer::kConv1, conv1_src, conv1_bw_pd.src_desc());
    memory conv1_bw_ddst = convert(ops, Layer::kConv1, d_conv1_dst, conv1_bw_pd.diff_dst_desc());
    memory conv1_dw = produce_into(after, Layer::kConv1, grad({c1, 1, k, k}, Tag::oihw, 0),
                                   conv1_bw_pd.diff_weights_desc());
    add(ops, Layer::kConv1, convolution_backward_weights(conv1_bw_pd),
        {{DNNL_ARG_SRC, conv1_bw_src}, {DNNL_ARG_DIFF_DST, conv1_bw_ddst},
         {DNNL_ARG_DIFF_WEIGHTS, conv1_dw}, {DNNL_ARG_DIFF_BIAS, grad({c1}, Tag::x, 1)}});
    ops.insert(ops.end(), after.begin(), after.end());

    pds.emplace_back("conv1 bwd-w", conv1_bw_pd);
}

}  // namespace psrun::worker
