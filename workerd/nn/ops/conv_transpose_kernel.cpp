// The conv_transpose kernel: oneDNN's deconvolution primitives (format_tag::any), the weights
// read from PyTorch's [I, O/G, (KD, KH,) KW] layout (oneDNN's iohw / giohw view of the same
// bytes; iodhw / giodhw in 3-D, bac / acbd in 1-D) and converted every forward; the weight
// gradient written back in that layout.
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/conv_transpose.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;
using Dt = memory::data_type;

namespace {

memory::dims to_dims(const std::vector<std::int64_t>& v) { return memory::dims(v.begin(), v.end()); }

// oneDNN's logical weights ([O, I, k...], grouped [G, O/G, I/G, k...]) over PyTorch's bytes.
memory::desc torch_weights(const ConvTransposeGeometry& g, Dt type) {
    memory::dims dims;
    if (g.groups != 1) dims.push_back(g.groups);
    dims.push_back(g.filters / g.groups);
    dims.push_back(g.in_channels / g.groups);
    dims.insert(dims.end(), g.kernel.begin(), g.kernel.end());
    // Per spatial rank (1, 2, 3): the I and O axes swapped, the kernel axes after them.
    static constexpr Tag kPlain[] = {Tag::bac, Tag::iohw, Tag::iodhw};
    static constexpr Tag kGrouped[] = {Tag::acbd, Tag::giohw, Tag::giodhw};
    const Tag tag = (g.groups == 1 ? kPlain : kGrouped)[g.spatial - 1];
    return memory::desc(dims, type, tag);
}

class ConvTransposeKernel final : public Kernel {
  public:
    // Backward reads the input (weight gradient) and the weights (data gradient), not the output.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads{BackwardReads::kAllInputs, false};
        reads.as_converted = 0b1;  // the source as input_as() gave it
        return reads;
    }

    void build(KernelBuilder& b) override {
        auto geometry = conv_transpose_geometry(b.node().attrs, b.input_info(0));
        if (!geometry) throw std::runtime_error(geometry.error().message);
        const ConvTransposeGeometry& g = *geometry;
        const auto& engine = b.context().engine;
        const Dt adt = b.context().activation_type();
        memory::dims dst_dims{b.input_dims(0)[0], g.filters};
        dst_dims.insert(dst_dims.end(), g.out.begin(), g.out.end());
        const memory::desc src_any(b.input_dims(0), adt, Tag::any), dst_any(dst_dims, b.output_type(0), Tag::any);
        const memory::desc w_any(torch_weights(g, adt).dims(), adt, Tag::any);
        const memory::desc bias_desc({g.filters}, Dt::f32, Tag::x);
        const memory::dims strides = to_dims(g.stride), pad_l = to_dims(g.pad_begin), pad_r = to_dims(g.pad_end);
        memory::dims dilates;
        for (const auto d : g.dilation) dilates.push_back(d - 1);  // oneDNN counts dilation from 0
        const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
        const auto alg = algorithm::deconvolution_direct;
        auto desc =
            g.bias ? deconvolution_forward::desc(prop, alg, src_any, w_any, bias_desc, dst_any, strides, dilates, pad_l,
                                                 pad_r)
                   : deconvolution_forward::desc(prop, alg, src_any, w_any, dst_any, strides, dilates, pad_l, pad_r);
        deconvolution_forward::primitive_desc pd(desc, engine);
        b.note("fwd", pd);
        const memory src = b.input_as(0, pd.src_desc());
        const memory weights = forward_convert(
            b, memory(torch_weights(g, Dt::f32), engine, b.input(1).get_data_handle()), pd.weights_desc());
        const memory dst = b.make_output(0, pd.dst_desc());
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst}};
        if (g.bias) args.emplace(DNNL_ARG_BIAS, b.input_as(2, bias_desc));
        b.forward(deconvolution_forward(pd), args);
        if (!b.needs_backward()) return;
        const memory diff_dst = b.output_diff(0, dst.get_desc());
        const bool want_w = b.needs_input_grad(1), want_b = g.bias && b.needs_input_grad(2);
        if (want_w || want_b) {
            const memory::desc dw_any(w_any.dims(), Dt::f32, Tag::any);
            auto wdesc = g.bias ? deconvolution_backward_weights::desc(alg, src_any, dw_any, bias_desc, dst_any,
                                                                       strides, dilates, pad_l, pad_r)
                                : deconvolution_backward_weights::desc(alg, src_any, dw_any, dst_any, strides, dilates,
                                                                       pad_l, pad_r);
            deconvolution_backward_weights::primitive_desc wpd(wdesc, engine, pd);
            b.note("bwd-w", wpd);
            const memory dw(wpd.diff_weights_desc(), engine);
            std::unordered_map<int, memory> wargs{
                {DNNL_ARG_SRC, backward_convert(b, src, wpd.src_desc())},
                {DNNL_ARG_DIFF_DST, backward_convert(b, diff_dst, wpd.diff_dst_desc())},
                {DNNL_ARG_DIFF_WEIGHTS, dw}};
            if (g.bias)
                wargs.emplace(DNNL_ARG_DIFF_BIAS, want_b ? b.input_diff(2, bias_desc) : memory(bias_desc, engine));
            b.backward(deconvolution_backward_weights(wpd), wargs);
            if (want_w) {
                // Into the plain gradient in PyTorch's layout (its handle read at run time: the
                // gradient buffer may be swapped).
                const auto wd = conv_transpose_weight_dims(g);
                const memory plain = b.input_diff(1, plain_desc(to_dims(wd), Dt::f32));
                memory view(torch_weights(g, Dt::f32), engine, plain.get_data_handle());
                reorder r(dw, view);
                b.backward([r, stream = b.context().stream, dw, view, plain]() mutable {
                    view.set_data_handle(plain.get_data_handle());
                    r.execute(stream, {{DNNL_ARG_FROM, dw}, {DNNL_ARG_TO, view}});
                });
            }
        }
        if (!b.needs_input_grad(0)) return;
        deconvolution_backward_data::primitive_desc dpd(
            deconvolution_backward_data::desc(alg, src_any, w_any, dst_any, strides, dilates, pad_l, pad_r), engine,
            pd);
        b.note("bwd-d", dpd);
        const memory dsrc = b.input_diff(0, dpd.diff_src_desc());
        b.backward(deconvolution_backward_data(dpd),
                   {{DNNL_ARG_DIFF_DST, backward_convert(b, diff_dst, dpd.diff_dst_desc())},
                    {DNNL_ARG_WEIGHTS, backward_convert(b, weights, dpd.weights_desc())},
                    {DNNL_ARG_DIFF_SRC, dsrc}});
    }
};

}  // namespace

std::unique_ptr<Kernel> make_conv_transpose_kernel() { return std::make_unique<ConvTransposeKernel>(); }

}  // namespace psrun::nn
