// The pool kernels (max_pool, avg_pool, global_avg_pool, global_max_pool): oneDNN's pooling on
// the input as its producer left it (converted only to the activation type); 1-D pools are
// oneDNN's 1-D pooling, 3-D pools its 3-D pooling; a dilated max pool is oneDNN's pooling_v2.
#include <memory>
#include <string>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/ops.h"
#include "workerd/nn/ops/pool.h"

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;

namespace {

bool is_reference(const pooling_forward::primitive_desc& pd) {
    const std::string impl = pd.impl_info_str();
    return impl.rfind("simple", 0) == 0 || impl.rfind("ref", 0) == 0;
}

class PoolKernel final : public Kernel {
  public:
    // Max: the workspace of its own (the argmax); average: nothing.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    void build(KernelBuilder& b) override {
        auto g = pool_geometry(b.node(), b.input_info(0));
        if (!g) throw std::runtime_error(g.error().message);
        if (b.node().attrs.contains("dilation")) {
            build_dilated(b, *g);
            return;
        }
        const Window2d& w = g->window;
        const algorithm alg = g->max                 ? algorithm::pooling_max
                              : g->count_include_pad ? algorithm::pooling_avg_include_padding
                                                     : algorithm::pooling_avg_exclude_padding;
        // Per axis, depth first (1-D: oneDNN's pooling over N x C x L; 3-D: over N x C x D x H x W).
        const memory::dims kernel = window_kernel(w, g->spatial);
        const memory::dims strides = window_strides(w, g->spatial);
        const auto pads = window_onnx_pads(w, g->spatial);
        const auto half = static_cast<std::ptrdiff_t>(pads.size() / 2);
        const memory::dims pad_l(pads.begin(), pads.begin() + half), pad_r(pads.begin() + half, pads.end());
        const auto adt = b.context().activation_type();
        memory src = b.input(0);
        if (src.get_desc().data_type() != adt) src = b.input_plain(0, adt);
        const auto in = b.input_dims(0);
        memory::dims out_dims{in[0], in[1]};
        for (const auto d : window_out_dims(w, g->spatial)) out_dims.push_back(d);
        const memory::desc dst_any(out_dims, adt, Tag::any);
        const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
        const auto make_pd = [&](const memory::desc& from) {
            return pooling_forward::primitive_desc(
                pooling_forward::desc(prop, alg, from, dst_any, strides, kernel, pad_l, pad_r), b.context().engine);
        };
        auto pd = make_pd(src.get_desc());
        // oneDNN 2.6 has no JIT pooling for plain NCHW with fewer channels than a vector (a
        // model's RGB input): its reference loop took 15 ms for 128x3x64x64. Channels-last is
        // JIT-pooled; the reorder there costs a few percent of that.
        const memory::desc nhwc(in, adt, g->spatial == 2 ? Tag::acdb : g->spatial == 3 ? Tag::acdeb : Tag::acb);
        if (is_reference(pd) && src.get_desc() != nhwc) {
            auto alt = make_pd(nhwc);
            if (!is_reference(alt)) {
                src = b.input_as(0, nhwc);
                pd = alt;
            }
        }
        b.note("fwd", pd);
        const memory dst = b.make_output(0, pd.dst_desc());
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
        memory workspace;
        if (g->max && b.context().training) {
            workspace = memory(pd.workspace_desc(), b.context().engine);
            args.emplace(DNNL_ARG_WORKSPACE, workspace);
        }
        b.forward(pooling_forward(pd), args);
        if (!b.needs_input_grad(0)) return;
        pooling_backward::primitive_desc bd(
            pooling_backward::desc(alg, src.get_desc(), dst.get_desc(), strides, kernel, pad_l, pad_r),
            b.context().engine, pd);
        b.note("bwd", bd);
        const memory ddst = b.output_diff(0, dst.get_desc());
        const memory dsrc = b.input_diff(0, bd.diff_src_desc());
        std::unordered_map<int, memory> bargs{{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dsrc}};
        if (g->max) bargs.emplace(DNNL_ARG_WORKSPACE, workspace);
        b.backward(pooling_backward(bd), bargs);
    }

  private:
    // A dilated max pool: oneDNN's pooling_v2 (its dilation counted from 0), on the plain input.
    static void build_dilated(KernelBuilder& b, const PoolGeometry& g) {
        const Window2d& w = g.window;
        const memory::dims kernel = window_kernel(w, g.spatial);
        const memory::dims strides = window_strides(w, g.spatial);
        memory::dims dilation = window_dilations(w, g.spatial);
        for (auto& d : dilation) d -= 1;
        const auto pads = window_onnx_pads(w, g.spatial);
        const auto half = static_cast<std::ptrdiff_t>(pads.size() / 2);
        const memory::dims pad_l(pads.begin(), pads.begin() + half), pad_r(pads.begin() + half, pads.end());
        const auto adt = b.context().activation_type();
        const memory src = b.input_plain(0, adt);
        const auto in = b.input_dims(0);
        memory::dims out_dims{in[0], in[1]};
        for (const auto d : window_out_dims(w, g.spatial)) out_dims.push_back(d);
        const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
        const pooling_v2_forward::primitive_desc pd(
            pooling_v2_forward::desc(prop, algorithm::pooling_max, src.get_desc(),
                                     memory::desc(out_dims, adt, Tag::any), strides, kernel, dilation, pad_l, pad_r),
            b.context().engine);
        b.note("fwd", pd);
        const memory dst = b.make_output(0, pd.dst_desc());
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, dst}};
        memory workspace;
        if (b.context().training) {
            workspace = memory(pd.workspace_desc(), b.context().engine);
            args.emplace(DNNL_ARG_WORKSPACE, workspace);
        }
        b.forward(pooling_v2_forward(pd), args);
        if (!b.needs_input_grad(0)) return;
        const pooling_v2_backward::primitive_desc bd(
            pooling_v2_backward::desc(algorithm::pooling_max, src.get_desc(), dst.get_desc(), strides, kernel, dilation,
                                      pad_l, pad_r),
            b.context().engine, pd);
        b.note("bwd", bd);
        const memory ddst = b.output_diff(0, dst.get_desc());
        const memory dsrc = b.input_diff(0, bd.diff_src_desc());
        b.backward(pooling_v2_backward(bd),
                   {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_SRC, dsrc}, {DNNL_ARG_WORKSPACE, workspace}});
    }
};

}  // namespace

std::unique_ptr<Kernel> make_pool_kernel() { return std::make_unique<PoolKernel>(); }

}  // namespace psrun::nn
