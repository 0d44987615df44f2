// Model construction: primitive descriptors, memories and the two op lists (forward, backward).
#include "workerd/model_impl.h"

namespace psrun::worker {

using namespace dnnl;
using prop = dnnl::prop_kind;
using alg = dnnl::algorithm;

namespace {

primitive_attr relu_attr() {
    post_ops po;
    po.append_eltwise(1.0f, alg::eltwise_relu, 0.0f, 0.0f);
    primitive_attr attr;
    attr.set_post_ops(po);
    return attr;
}

}  // namespace

memory Model::Impl::wrap(const memory::dims& dims, Tag tag, const float* data) const {
    return memory(md(dims, Dt::f32, tag), eng, const_cast<float*>(data));
}

void Model::Impl::add(std::vector<Op>& ops, Layer layer, const primitive& p,
                      std::unordered_map<int, memory> args) {
    ops.push_back(Op{layer, [this, p, args]() { p.execute(strm, args); }});
}

memory Model::Impl::convert(std::vector<Op>& ops, Layer layer, const memory& src,
                            const memory::desc& want) {
    if (src.get_desc() == want) return src;
    memory dst(want, eng);
    add(ops, layer, reorder(src, dst), {{DNNL_ARG_FROM, src}, {DNNL_ARG_TO, dst}});
    return dst;
}

memory Model::Impl::produce_into(std::vector<Op>& after, Layer layer, const memory& dst,
                                 const memory::desc& have) {
    if (dst.get_desc() == have) return dst;
    memory tmp(have, eng);
    add(after, layer, reorder(tmp, dst), {{DNNL_ARG_FROM, tmp}, {DNNL_ARG_TO, dst}});
    return tmp;
}

Model::Impl::Impl(const ModelConfig& config, const ParameterSet& p, ParameterSet& g)
    : cfg(config), params(p), grads(g),
      adt(config.precision == Precision::kBf16 ? Dt::bf16 : Dt::f32) {
    const auto& s = cfg.shape;
    const std::size_t n = static_cast<std::size_t>(cfg.batch_size);
    input.assign(n * static_cast<std::size_t>(s.height * s.width), 0.0f);
    labels.assign(n, 0);
    predictions.assign(n, 0);
    build_forward();
    if (!cfg.forward_only) build_backward();
}

// conv1 + bias + ReLU and pool1 as oneDNN primitives (the unfused first layer).
void Model::Impl::build_conv1_pool1() {
    const auto& s = cfg.shape;
    const memory::dim n = cfg.batch_size, h = s.height, w = s.width, k = s.kernel, pad = k / 2;
    const memory::dim c1 = s.conv1_channels;
    const memory::dims one{1, 1}, pads{pad, pad}, two{2, 2}, zero{0, 0};
    auto& ops = fwd_ops;

    // conv1 + bias + ReLU (fused post-op); its input reorder (if any) runs first.
    conv1_pd = convolution_forward::primitive_desc(
        convolution_forward::desc(prop::forward_training, alg::convolution_direct,
                                  md({n, 1, h, w}, adt, Tag::any), md({c1, 1, k, k}, adt, Tag::any),
                                  md({c1}, Dt::f32, Tag::x), md({n, c1, h, w}, adt, Tag::any), one,
                                  pads, pads),
        relu_attr(), eng);
    conv1_src = convert(ops, Layer::kInput, user_input, conv1_pd.src_desc());
    const memory conv1_w_plain = wrap({c1, 1, k, k}, Tag::oihw, params.tensor(0).data());
    const memory conv1_w = convert(ops, Layer::kConv1, conv1_w_plain, conv1_pd.weights_desc());
    conv1_dst = memory(conv1_pd.dst_desc(), eng);
    add(ops, Layer::kConv1, convolution_forward(conv1_pd),
        {{DNNL_ARG_SRC, conv1_src}, {DNNL_ARG_WEIGHTS, conv1_w},
         {DNNL_ARG_BIAS, wrap({c1}, Tag::x, params.tensor(1).data())}, {DNNL_ARG_DST, conv1_dst}});
    pds.emplace_back("conv1", conv1_pd);

    // pool1.
    pool1_pd = pooling_forward::primitive_desc(
        pooling_forward::desc(prop::forward_training, alg::pooling_max, conv1_dst.get_desc(),
                              md({n, c1, h / 2, w / 2}, adt, Tag::any), two, two, zero, zero),
        eng);
    pool1_dst = memory(pool1_pd.dst_desc(), eng);
    pool1_ws = memory(pool1_pd.workspace_desc(), eng);
    add(ops, Layer::kPool1, pooling_forward(pool1_pd),
        {{DNNL_ARG_SRC, conv1_dst}, {DNNL_ARG_DST, pool1_dst}, {DNNL_ARG_WORKSPACE, pool1_ws}});
    pds.emplace_back("pool1", pool1_pd);
    layer_outputs.emplace(static_cast<int>(Layer::kConv1), conv1_dst);
}

void Model::Impl::build_forward() {
    const auto& s = cfg.shape;
    const memory::dim n = cfg.batch_size, h = s.height, w = s.width, k = s.kernel, pad = k / 2;
    const memory::dim c1 = s.conv1_channels, c2 = s.conv2_channels, f = s.fc1_units;
    const memory::dim z = s.classes, fin = s.flat_features();
    const memory::dims one{1, 1}, pads{pad, pad}, two{2, 2}, zero{0, 0};
    auto& ops = fwd_ops;

    user_input = wrap({n, 1, h, w}, Tag::nchw, input.data());

    // conv2 + bias + ReLU.
    conv2_pd = convolution_forward::primitive_desc(
        convolution_forward::desc(prop::forward_training, alg::convolution_direct,
                                  md({n, c1, h / 2, w / 2}, adt, Tag::any),
                                  md({c2, c1, k, k}, adt, Tag::any), md({c2}, Dt::f32, Tag::x),
                                  md({n, c2, h / 2, w / 2}, adt, Tag::any), one, pads, pads),
        relu_attr(), eng);
    // conv1 + ReLU + pool1: one hand-fused f32 layer writing nChw16c, which is conv2's input
    // in f32 on AVX-512 (in bf16 a reorder converts it: conv1 in bf16 is not faster, its
    // weight gradient with one input channel is slower); else oneDNN's primitives.
    const memory::desc blocked = md({n, c1, h / 2, w / 2}, Dt::f32, Tag::nChw16c);
    if (cfg.hand_kernels &&
        FusedConv1Pool::supported(static_cast<int>(h), static_cast<int>(w),
                                  static_cast<int>(c1), static_cast<int>(k))) {
        conv1_pool = std::make_unique<FusedConv1Pool>(static_cast<int>(n), static_cast<int>(h),
                                                      static_cast<int>(w), static_cast<int>(c1),
                                                      static_cast<int>(k));
        pool1_dst = memory(blocked, eng);
        ops.push_back(Op{Layer::kConv1, [this] {
                             conv1_pool->forward(input.data(), params.tensor(0).data(),
                                                 params.tensor(1).data(),
                                                 static_cast<float*>(pool1_dst.get_data_handle()));
                         }});
    } else {
        build_conv1_pool1();
    }

    conv2_src = convert(ops, Layer::kConv2, pool1_dst, conv2_pd.src_desc());
    const memory conv2_w_plain = wrap({c2, c1, k, k}, Tag::oihw, params.tensor(2).data());
    conv2_weights = convert(ops, Layer::kConv2, conv2_w_plain, conv2_pd.weights_desc());
    conv2_dst = memory(conv2_pd.dst_desc(), eng);
    add(ops, Layer::kConv2, convolution_forward(conv2_pd),
        {{DNNL_ARG_SRC, conv2_src}, {DNNL_ARG_WEIGHTS, conv2_weights},
         {DNNL_ARG_BIAS, wrap({c2}, Tag::x, params.tensor(3).data())}, {DNNL_ARG_DST, conv2_dst}});
    pds.emplace_back("conv2", conv2_pd);

    // pool2: hand-written when conv2 writes nChw16c f32 (conv2's ReLU backward then fused into
    // its backward), else oneDNN's primitive.
    const memory::desc pooled2 = md({n, c2, h / 4, w / 4}, Dt::f32, Tag::nChw16c);
    if (cfg.hand_kernels && adt == Dt::f32 &&
        conv2_dst.get_desc() == md({n, c2, h / 2, w / 2}, Dt::f32, Tag::nChw16c) &&
        BlockedMaxPool::supported(static_cast<int>(c2), static_cast<int>(h / 2),
                                  static_cast<int>(w / 2))) {
        pool2 = std::make_unique<BlockedMaxPool>(static_cast<int>(n), static_cast<int>(c2),
                                                 static_cast<int>(h / 2), static_cast<int>(w / 2));
        pool2_dst = memory(pooled2, eng);
        ops.push_back(Op{Layer::kPool2, [this] {
                             pool2->forward(static_cast<const float*>(conv2_dst.get_data_handle()),
                                            static_cast<float*>(pool2_dst.get_data_handle()));
                         }});
    } else {
        pool2_pd = pooling_forward::primitive_desc(
            pooling_forward::desc(prop::forward_training, alg::pooling_max, conv2_dst.get_desc(),
                                  md({n, c2, h / 4, w / 4}, adt, Tag::any), two, two, zero, zero),
            eng);
        pool2_dst = memory(pool2_pd.dst_desc(), eng);
        pool2_ws = memory(pool2_pd.workspace_desc(), eng);
        add(ops, Layer::kPool2, pooling_forward(pool2_pd),
            {{DNNL_ARG_SRC, conv2_dst}, {DNNL_ARG_DST, pool2_dst}, {DNNL_ARG_WORKSPACE, pool2_ws}});
        pds.emplace_back("pool2", pool2_pd);
    }

    // fc1 + bias + ReLU on the NHWC-flattened pooled activations (TF's reshape order).
    // When pool2 already writes NHWC, fc1 reads pool2's buffer directly.
    const memory::desc nhwc_4d = md({n, c2, h / 4, w / 4}, adt, Tag::nhwc);
    if (pool2_dst.get_desc() == nhwc_4d) {
        fc1_src = memory(md({n, fin}, adt, Tag::nc), eng, pool2_dst.get_data_handle());
    } else {
        fc1_src = memory(md({n, fin}, adt, Tag::nc), eng);
    }
    fc1_src_4d = memory(nhwc_4d, eng, fc1_src.get_data_handle());
    if (pool2_dst.get_desc() != nhwc_4d) {
        add(ops, Layer::kFc1, reorder(pool2_dst, fc1_src_4d),
            {{DNNL_ARG_FROM, pool2_dst}, {DNNL_ARG_TO, fc1_src_4d}});
    }
    fc1_pd = inner_product_forward::primitive_desc(
        inner_product_forward::desc(prop::forward_training, md({n, fin}, adt, Tag::nc),
                                    md({f, fin}, adt, cfg.fc1_blocked() ? Tag::any : Tag::oi),
                                    md({f}, Dt::f32, Tag::x),
                                    md({n, f}, adt, Tag::nc)),
        relu_attr(), eng);
    fc1_weights = convert(ops, Layer::kFc1, wrap({f, fin}, Tag::oi, params.tensor(4).data()),
                          fc1_pd.weights_desc());
    fc1_dst = memory(fc1_pd.dst_desc(), eng);
    add(ops, Layer::kFc1, inner_product_forward(fc1_pd),
        {{DNNL_ARG_SRC, fc1_src}, {DNNL_ARG_WEIGHTS, fc1_weights},
         {DNNL_ARG_BIAS, wrap({f}, Tag::x, params.tensor(5).data())}, {DNNL_ARG_DST, fc1_dst}});
    pds.emplace_back("fc1", fc1_pd);

    ops.push_back(Op{Layer::kDropout, [this] { run_dropout(); }});

    // fc2 -> f32 logits.
    fc2_pd = inner_product_forward::primitive_desc(
        inner_product_forward::desc(prop::forward_training, md({n, f}, adt, Tag::nc),
                                    md({z, f}, adt, Tag::oi), md({z}, Dt::f32, Tag::x),
                                    md({n, z}, Dt::f32, Tag::nc)),
        eng);
    fc2_weights = convert(ops, Layer::kFc2, wrap({z, f}, Tag::oi, params.tensor(6).data()),
                          fc2_pd.weights_desc());
    logits = memory(fc2_pd.dst_desc(), eng);
    add(ops, Layer::kFc2, inner_product_forward(fc2_pd),
        {{DNNL_ARG_SRC, fc1_dst}, {DNNL_ARG_WEIGHTS, fc2_weights},
         {DNNL_ARG_BIAS, wrap({z}, Tag::x, params.tensor(7).data())}, {DNNL_ARG_DST, logits}});
    pds.emplace_back("fc2", fc2_pd);

    dlogits = memory(md({n, z}, adt, Tag::nc), eng);
    ops.push_back(Op{Layer::kLoss, [this] { run_loss(); }});

    // The input reorder (if any) must run after the user buffer is filled: it is first in ops.
    layer_outputs.insert({{static_cast<int>(Layer::kPool1), pool1_dst},
                     {static_cast<int>(Layer::kConv2), conv2_dst},
                     {static_cast<int>(Layer::kPool2), pool2_dst},
                     {static_cast<int>(Layer::kFc1), fc1_dst},
                     {static_cast<int>(Layer::kFc2), logits}});
}

}  // namespace psrun::worker
