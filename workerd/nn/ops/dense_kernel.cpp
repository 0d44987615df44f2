// The dense kernel (and dense + relu, the ReLU a post-op) on the input viewed as rows of
// features: an image in NHWC order (TF's flattening), [..., F] as [rows, F] in its plain layout.
// The weights [units, features] and their gradient stay in the plain layout in both precisions.
//
// f32 with no more rows than features runs oneDNN's matmul on views of the plain tensors
// (forward: X x W^T with W^T a strided view; data gradient: dY x W; weight gradient: dY^T x X
// with dY^T a strided view; bias gradient: ones x dY): its brgemm kernels beat the inner
// product's gemm on mnist_deep's 3136x1024 layer (the three GEMMs 5.8 against 7.5 ms at batch
// 100). With more rows than features (a transformer's per-position layers, 1792 rows of 64) the
// transposed views made the matmul slower, and the inner product stays (docs/benchmarks.md
// "Measured decisions"). bf16 runs the inner product, as fast or faster than its matmul on
// mnist_deep's layer, converting the weights to plain bf16 every forward. (Letting oneDNN 2.6 pick
// a blocked bf16 layout made its brgemm kernels faster, but the reorders into and out of it cost
// more: mnist_deep's 3136x1024 layer, batch 128, 6.9 ms a step against 5.3 ms.)
#include <algorithm>
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;
using Dt = memory::data_type;

namespace {

memory view(const memory& m, const memory::desc& desc, const engine& e) { return memory(desc, e, m.get_data_handle()); }

// The f32 matmul form (header comment). src2: the input as {rows, features}; dst2: the output.
// src_nd: the input's own desc (NHWC for an image).
void build_f32_matmul(KernelBuilder& b, const memory::desc& src_nd, const memory& src2, const memory& dst2,
                      memory::dim rows, memory::dim features, memory::dim units, bool bias, bool relu) {
    const auto& engine = b.context().engine;
    const memory::desc w_md({units, features}, Dt::f32, Tag::ab);
    const memory weights = b.input_as(1, w_md);
    const memory::desc wt_md({features, units}, Dt::f32, memory::dims{1, features});  // W^T, a view
    const memory::desc bias_md({1, units}, Dt::f32, Tag::ab);
    primitive_attr attr;
    if (relu) {
        post_ops po;
        po.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
        attr.set_post_ops(po);
    }
    const memory::desc src2_md = src2.get_desc(), dst2_md = dst2.get_desc();
    matmul::primitive_desc pd(
        bias ? matmul::desc(src2_md, wt_md, bias_md, dst2_md) : matmul::desc(src2_md, wt_md, dst2_md), attr, engine);
    b.note("fwd", pd);
    std::unordered_map<int, memory> args{
        {DNNL_ARG_SRC, src2}, {DNNL_ARG_WEIGHTS, view(weights, wt_md, engine)}, {DNNL_ARG_DST, dst2}};
    if (bias) args.emplace(DNNL_ARG_BIAS, view(b.input_as(2, memory::desc({units}, Dt::f32, Tag::x)), bias_md, engine));
    b.forward(matmul(pd), args);
    if (!b.needs_backward()) return;

    const memory ddst = view(b.output_diff(0, plain_desc(b.output_dims(0), Dt::f32)), dst2_md, engine);
    if (relu) add_relu_backward(b, dst2, ddst);
    if (b.needs_input_grad(1)) {
        const memory::desc ddst_t({units, rows}, Dt::f32, memory::dims{1, units});  // dY^T, a view
        matmul::primitive_desc bw(matmul::desc(ddst_t, src2_md, w_md), engine);
        b.note("bwd-w", bw);
        const memory dw = b.input_diff(1, w_md);
        b.backward(matmul(bw),
                   {{DNNL_ARG_SRC, view(ddst, ddst_t, engine)}, {DNNL_ARG_WEIGHTS, src2}, {DNNL_ARG_DST, dw}});
    }
    if (bias && b.needs_input_grad(2)) {
        // dB = ones[1, rows] x dY: the column sums, on the same kernels.
        const memory::desc ones_md({1, rows}, Dt::f32, Tag::ab);
        const memory ones(ones_md, engine);
        std::fill_n(static_cast<float*>(ones.get_data_handle()), rows, 1.0f);
        matmul::primitive_desc bb(matmul::desc(ones_md, dst2_md, bias_md), engine);
        b.note("bwd-b", bb);
        // The gradient may live in a buffer set_gradient_buffer() re-points: the {1, units} view
        // follows it at every step.
        const memory db = b.input_diff(2, memory::desc({units}, Dt::f32, Tag::x));
        b.backward([p = matmul(bb), stream = b.context().stream, ones, ddst, db,
                    db_row = view(db, bias_md, engine)]() mutable {
            db_row.set_data_handle(db.get_data_handle());
            p.execute(stream, {{DNNL_ARG_SRC, ones}, {DNNL_ARG_WEIGHTS, ddst}, {DNNL_ARG_DST, db_row}});
        });
    }
    if (!b.needs_input_grad(0)) return;
    matmul::primitive_desc bd(matmul::desc(dst2_md, w_md, src2_md), engine);
    b.note("bwd-d", bd);
    const memory dsrc2 = view(b.input_diff(0, src_nd), src2_md, engine);
    b.backward(matmul(bd), {{DNNL_ARG_SRC, ddst}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dsrc2}});
}

class DenseKernel final : public Kernel {
  public:
    // The input and weights (weight gradient); the output only for the relu post-op's backward.
    BackwardReads backward_reads(const std::vector<const Node*>& nodes, const EngineContext&) const override {
        BackwardReads reads{BackwardReads::kAllInputs, nodes.size() == 2, -1};
        reads.as_converted = 0b1;                     // the source as input_as() gave it
        reads.keeps_output_grad = nodes.size() == 1;  // a relu post-op's backward works on dY in place
        return reads;
    }

    void build(KernelBuilder& b) override {
        const bool relu = b.nodes().size() == 2;
        const auto& engine = b.context().engine;
        const Dt adt = b.context().activation_type();
        const auto in = b.input_dims(0);
        const bool image = in.size() == 4 && !b.node().attrs.value("last_axis", false);
        const memory::dim units = b.node().attrs.at("units").get<memory::dim>();
        const bool bias = b.node().attrs.at("bias").get<bool>();
        memory::dim rows = 1, features = 1;
        if (image) {
            rows = in[0];
            features = in[1] * in[2] * in[3];
        } else {
            for (std::size_t i = 0; i + 1 < in.size(); ++i) rows *= in[i];
            features = in.back();
        }
        // The source as {rows, features}.
        const memory::desc src_nd = image ? memory::desc(in, adt, Tag::nhwc) : plain_desc(in, adt);
        const memory::desc src2_md({rows, features}, adt, Tag::nc);
        const memory src2 = view(b.input_as(0, src_nd), src2_md, engine);
        const memory::dims w_dims{units, features}, b_dims{units};
        const memory::desc w_md(w_dims, adt, Tag::oi);
        const memory::desc b_md(b_dims, Dt::f32, Tag::x);
        const Dt out_type = b.output_type(0);
        const memory::desc dst2_md({rows, units}, out_type, Tag::nc);
        if (adt == Dt::f32 && rows <= features) {
            const memory dst = b.make_output(0, plain_desc(b.output_dims(0), out_type));
            build_f32_matmul(b, src_nd, src2, view(dst, dst2_md, engine), rows, features, units, bias, relu);
            return;
        }
        const auto prop = b.context().training ? prop_kind::forward_training : prop_kind::forward_inference;
        auto desc = bias ? inner_product_forward::desc(prop, src2_md, w_md, b_md, dst2_md)
                         : inner_product_forward::desc(prop, src2_md, w_md, dst2_md);
        primitive_attr attr;
        if (relu) {
            post_ops po;
            po.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
            attr.set_post_ops(po);
        }
        inner_product_forward::primitive_desc pd(desc, attr, engine);
        b.note("fwd", pd);
        const memory weights = b.input_as(1, pd.weights_desc());
        const memory dst = b.make_output(0, plain_desc(b.output_dims(0), out_type));
        const memory dst2 = view(dst, dst2_md, engine);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src2}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DST, dst2}};
        if (bias) args.emplace(DNNL_ARG_BIAS, b.input_as(2, b_md));
        b.forward(inner_product_forward(pd), args);
        if (!b.needs_backward()) return;

        // The gradient w.r.t. dst (the fused ReLU's backward in the output's type), then in the
        // activation type (the model output may be f32 in bf16).
        const memory ddst_out = view(b.output_diff(0, plain_desc(b.output_dims(0), out_type)), dst2_md, engine);
        if (relu) add_relu_backward(b, dst2, ddst_out);
        const memory ddst = backward_convert(b, ddst_out, memory::desc({rows, units}, adt, Tag::nc));
        const bool want_w = b.needs_input_grad(1), want_b = bias && b.needs_input_grad(2);
        if (want_w || want_b) {
            const memory::desc dw_md(w_dims, Dt::f32, Tag::oi);
            auto bw_desc = bias ? inner_product_backward_weights::desc(src2_md, dw_md, b_md, ddst.get_desc())
                                : inner_product_backward_weights::desc(src2_md, dw_md, ddst.get_desc());
            inner_product_backward_weights::primitive_desc bw(bw_desc, engine, pd);
            b.note("bwd-w", bw);
            const memory dw = want_w ? b.input_diff(1, bw.diff_weights_desc()) : memory(bw.diff_weights_desc(), engine);
            std::unordered_map<int, memory> bargs{
                {DNNL_ARG_SRC, src2}, {DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_DIFF_WEIGHTS, dw}};
            if (bias) bargs.emplace(DNNL_ARG_DIFF_BIAS, want_b ? b.input_diff(2, b_md) : memory(b_md, engine));
            b.backward(inner_product_backward_weights(bw), bargs);
        }
        if (!b.needs_input_grad(0)) return;
        inner_product_backward_data::primitive_desc bd(
            inner_product_backward_data::desc(src2_md, weights.get_desc(), ddst.get_desc()), engine, pd);
        b.note("bwd-d", bd);
        const memory dsrc2 = view(b.input_diff(0, src_nd), src2_md, engine);
        b.backward(inner_product_backward_data(bd),
                   {{DNNL_ARG_DIFF_DST, ddst}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_DIFF_SRC, dsrc2}});
    }
};

}  // namespace

std::unique_ptr<Kernel> make_dense_kernel() { return std::make_unique<DenseKernel>(); }

}  // namespace psrun::nn
