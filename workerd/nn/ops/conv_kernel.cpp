// The conv2d kernel (and conv2d + relu, the ReLU a post-op): oneDNN's convolution primitives
// with format_tag::any, weights converted from the plain buffer every forward.
#include "workerd/nn/ops/conv_kernel.h"

#include "workerd/nn/kernels/depthwise_weights_grad.h"
#include "workerd/nn/ops/ops.h"

#include <memory>

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;
using Dt = memory::data_type;

namespace {

struct Descs {
    memory::desc src, weights, bias, dst;
    memory::dims strides, dilates, pad_l, pad_r;
};

Descs conv_descs(const KernelBuilder& b, const ConvGeometry& g, Tag dst_tag) {
    const Window2d& w = g.window;
    const Dt adt = b.context().activation_type();
    const memory::dims src_dims = b.input_dims(0);
    memory::dims dst_dims{src_dims[0], g.filters};
    for (const auto d : window_out_dims(w, g.spatial)) dst_dims.push_back(d);
    const memory::dims weights = conv_weight_dims(g);
    // oneDNN's 1-D, 2-D or 3-D convolution: per axis, depth first; oneDNN counts dilation from 0.
    memory::dims dilates = window_dilations(w, g.spatial);
    for (auto& d : dilates) d -= 1;
    const auto pads = window_onnx_pads(w, g.spatial);
    const auto half = static_cast<std::ptrdiff_t>(pads.size() / 2);
    return Descs{{src_dims, adt, Tag::any},
                 {weights, adt, Tag::any},
                 {memory::dims{g.filters}, Dt::f32, Tag::x},
                 {dst_dims, b.output_type(0), dst_tag},
                 window_strides(w, g.spatial),
                 dilates,
                 memory::dims(pads.begin(), pads.begin() + half),
                 memory::dims(pads.begin() + half, pads.end())};
}

// Grouped weights are [G, O/G, I/G, (KD, KH,) KW] to oneDNN; the same bytes as [O, I/G, (KD, KH,) KW].
memory::desc weights_shape(const ConvGeometry& g, const memory::desc& plain_or_any) {
    if (g.groups == 1) return plain_or_any;
    const auto d = plain_or_any.dims();
    memory::dims grouped{g.groups, d[0] / g.groups};
    grouped.insert(grouped.end(), d.begin() + 1, d.end());
    const bool any = plain_or_any.data.format_kind == dnnl_format_kind_any;
    const Tag plain = d.size() == 3 ? Tag::goiw : d.size() == 5 ? Tag::goidhw : Tag::goihw;
    return memory::desc(grouped, plain_or_any.data_type(), any ? Tag::any : plain);
}

class ConvKernel final : public Kernel {
  public:
    // The input and weights (weight gradient); the output only for the relu post-op's backward.
    BackwardReads backward_reads(const std::vector<const Node*>& nodes, const EngineContext&) const override {
        BackwardReads reads{BackwardReads::kAllInputs, nodes.size() == 2, -1};
        reads.as_converted = 0b1;                     // the source as input_as() gave it (ConvForward::src)
        reads.keeps_output_grad = nodes.size() == 1;  // a relu post-op's backward works on dY in place
        return reads;
    }

    void build(KernelBuilder& b) override {
        const bool relu = b.nodes().size() == 2;
        ConvForwardSpec spec;
        if (relu) spec.post_op = algorithm::eltwise_relu;
        auto f = std::make_shared<ConvForward>(build_conv_forward(b, spec));
        if (!b.needs_backward()) return;
        const memory diff = b.output_diff(0, f->dst.get_desc());
        if (relu) add_relu_backward(b, f->dst, diff);
        build_conv_backward(b, *f, diff);
    }
};

}  // namespace

ConvForward build_conv_forward(KernelBuilder& b, const ConvForwardSpec& spec) {
    auto g = conv_geometry(b.node().attrs, b.input_info(0));
    if (!g) throw std::runtime_error(g.error().message);
    const bool own_weights = static_cast<bool>(spec.weights);
    if (own_weights) g->bias = static_cast<bool>(spec.bias);
    const Descs d = conv_descs(b, *g, spec.dst_tag);
    const memory::desc w_any = weights_shape(*g, d.weights);
    const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
    auto desc = g->bias ? convolution_forward::desc(prop, algorithm::convolution_direct, d.src, w_any, d.bias, d.dst,
                                                    d.strides, d.dilates, d.pad_l, d.pad_r)
                        : convolution_forward::desc(prop, algorithm::convolution_direct, d.src, w_any, d.dst, d.strides,
                                                    d.dilates, d.pad_l, d.pad_r);
    primitive_attr attr;
    if (spec.post_op != algorithm::undef) {
        post_ops po;
        po.append_eltwise(1.0f, spec.post_op, spec.alpha, spec.beta);
        attr.set_post_ops(po);
    }
    ConvForward f{*g, convolution_forward::primitive_desc(desc, attr, b.context().engine), {}, {}, {}};
    b.note("fwd", f.pd);
    f.src = b.input_as(0, f.pd.src_desc());
    if (g->groups == 1 && !own_weights) {
        f.weights = b.input_as(1, f.pd.weights_desc());
    } else {  // the plain [O, I/G, (KH,) KW] bytes are oneDNN's goihw [G, O/G, I/G, (KH,) KW]
        const memory& plain = own_weights ? spec.weights : b.input(1);
        f.weights =
            forward_convert(b, memory(weights_shape(*g, plain.get_desc()), b.context().engine, plain.get_data_handle()),
                            f.pd.weights_desc());
    }
    // The kernel's output when the kernel ends at the convolution (and its post-op); else (a
    // fused pool after it) scratch the kernel reads on.
    const bool output = b.output_dims(0) == f.pd.dst_desc().dims();
    f.dst = output ? b.make_output(0, f.pd.dst_desc()) : b.scratch(f.pd.dst_desc(), false);
    std::unordered_map<int, memory> args{{DNNL_ARG_SRC, f.src}, {DNNL_ARG_WEIGHTS, f.weights}, {DNNL_ARG_DST, f.dst}};
    if (g->bias) args.emplace(DNNL_ARG_BIAS, own_weights ? spec.bias : b.input_as(2, d.bias));
    b.forward(convolution_forward(f.pd), args);
    return f;
}

namespace {

// The hand depthwise weight gradient (kernels/depthwise_weights_grad.h) where it applies: a
// 2-D conv with one filter per channel, no dilation, f32 source and output gradient in the
// same 8- or 16-channel blocked layout. False: oneDNN's primitive does it.
bool build_depthwise_weights_grad(KernelBuilder& b, const ConvForward& f, const memory& diff_dst, bool want_w,
                                  bool want_b) {
    const ConvGeometry& g = f.geometry;
    const Window2d& w = g.window;
    if (!b.context().hand_kernels || g.spatial != 2 || g.groups != g.in_channels || g.filters != g.in_channels ||
        w.dh != 1 || w.dw != 1 || !want_w)
        return false;
    const memory::dims src_dims = f.src.get_desc().dims(), dst_dims = diff_dst.get_desc().dims();
    std::int64_t lanes = 0;
    for (const auto& [tag, n] : {std::pair{Tag::nChw8c, 8}, std::pair{Tag::nChw16c, 16}})
        if (f.src.get_desc() == memory::desc(src_dims, Dt::f32, tag) &&
            diff_dst.get_desc() == memory::desc(dst_dims, Dt::f32, tag))
            lanes = n;
    if (lanes == 0) return false;
    kernels::DepthwiseShape shape{src_dims[0], src_dims[1], src_dims[2], src_dims[3], dst_dims[2], dst_dims[3], w.kh,
                                  w.kw,        w.sh,        w.sw,        w.pt,        w.pl,        lanes};
    auto grad = std::make_shared<kernels::DepthwiseWeightsGrad>(shape);
    const memory dw = b.input_diff(1, plain_desc(conv_weight_dims(g), Dt::f32));
    const memory db = want_b ? b.input_diff(2, plain_desc({g.filters}, Dt::f32)) : memory();
    b.note("bwd-w: hand depthwise (nChw" + std::to_string(lanes) + "c)");
    // Handles read when it runs: the gradient buffer may be swapped.
    b.backward([grad, src = f.src, diff_dst, dw, db] {
        grad->run(static_cast<const float*>(src.get_data_handle()),
                  static_cast<const float*>(diff_dst.get_data_handle()), static_cast<float*>(dw.get_data_handle()),
                  db ? static_cast<float*>(db.get_data_handle()) : nullptr);
    });
    return true;
}

}  // namespace

void build_conv_backward(KernelBuilder& b, const ConvForward& f, const memory& diff_dst) {
    const ConvGeometry& g = f.geometry;
    const Descs d = conv_descs(b, g, Tag::any);
    const auto& engine = b.context().engine;
    const bool want_w = b.needs_input_grad(1), want_b = g.bias && b.needs_input_grad(2);
    if ((want_w || want_b) && !build_depthwise_weights_grad(b, f, diff_dst, want_w, want_b)) {
        const memory::desc dw_any = weights_shape(g, memory::desc(d.weights.dims(), Dt::f32, Tag::any));
        auto desc = g.bias ? convolution_backward_weights::desc(algorithm::convolution_direct, d.src, dw_any, d.bias,
                                                                d.dst, d.strides, d.dilates, d.pad_l, d.pad_r)
                           : convolution_backward_weights::desc(algorithm::convolution_direct, d.src, dw_any, d.dst,
                                                                d.strides, d.dilates, d.pad_l, d.pad_r);
        convolution_backward_weights::primitive_desc pd(desc, engine, f.pd);
        b.note("bwd-w", pd);
        const memory src = backward_convert(b, f.src, pd.src_desc());
        const memory ddst = backward_convert(b, diff_dst, pd.diff_dst_desc());
        const memory dw =
            g.groups == 1 && want_w ? b.input_diff(1, pd.diff_weights_desc()) : memory(pd.diff_weights_desc(), engine);
        std::unordered_map<int, memory> args{
            {DNNL_ARG_SRC, src}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
        if (g.bias) args.emplace(DNNL_ARG_DIFF_BIAS, want_b ? b.input_diff(2, d.bias) : memory(d.bias, engine));
        b.backward(convolution_backward_weights(pd), args);
        if (g.groups != 1 && want_w) {
            // Into the plain [O, I/G, (KH,) KW] gradient, viewed as goihw / goiw (its handle read at run
            // time: the gradient buffer may be swapped).
            const memory plain = b.input_diff(1, plain_desc(d.weights.dims(), Dt::f32));
            memory grouped(weights_shape(g, plain.get_desc()), engine, plain.get_data_handle());
            reorder r(dw, grouped);
            b.backward([r, stream = b.context().stream, dw, grouped, plain]() mutable {
                grouped.set_data_handle(plain.get_data_handle());
                r.execute(stream, {{DNNL_ARG_FROM, dw}, {DNNL_ARG_TO, grouped}});
            });
        }
    }
    if (!b.needs_input_grad(0)) return;
    convolution_backward_data::primitive_desc pd(
        convolution_backward_data::desc(algorithm::convolution_direct, d.src, weights_shape(g, d.weights), d.dst,
                                        d.strides, d.dilates, d.pad_l, d.pad_r),
        engine, f.pd);
    b.note("bwd-d", pd);
    const memory w = backward_convert(b, f.weights, pd.weights_desc());
    const memory ddst = backward_convert(b, diff_dst, pd.diff_dst_desc());
    const memory dsrc = b.input_diff(0, pd.diff_src_desc());
    b.backward(convolution_backward_data(pd),
               {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, w}, {DNNL_ARG_DIFF_SRC, dsrc}});
}

std::unique_ptr<Kernel> make_conv_kernel() { return std::make_unique<ConvKernel>(); }

}  // namespace psrun::nn
