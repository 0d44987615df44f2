// concat and split, each other's backward, on plain layouts: concat on oneDNN's concat
// primitive, split as reorders out of sub-memories (strided views at an offset along the
// axis). Forward in the activation type; backward in f32.
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

// dst = the `parts` side by side along `axis` (one concat primitive).
Op run_concat(KernelBuilder& b, const std::vector<View>& parts, const View& dst, int axis, const char* what) {
    std::vector<memory::desc> descs;
    std::unordered_map<int, memory> args{{DNNL_ARG_DST, dst.view}};
    std::vector<View> views{dst};
    for (std::size_t i = 0; i < parts.size(); ++i) {
        descs.push_back(parts[i].view.get_desc());
        args[DNNL_ARG_MULTIPLE_SRC + static_cast<int>(i)] = parts[i].view;
        views.push_back(parts[i]);
    }
    concat::primitive_desc pd(dst.view.get_desc(), axis, descs, b.context().engine);
    b.note(what, pd);
    return run_primitive(b, concat(pd), std::move(args), std::move(views));
}

// `whole` (plain, `type`) cut along `axis` into pieces of `dims[k]`: the views of each piece.
std::vector<View> pieces(const memory& whole, const std::vector<MemDims>& dims, int axis, Dt type,
                         const engine& engine) {
    const memory::desc full = plain_desc(whole.get_desc().dims(), type);
    std::vector<View> out;
    MemDims offsets(dims.front().size(), 0);
    for (const auto& d : dims) {
        out.push_back(view_of(whole, full.submemory_desc(d, offsets), engine));
        offsets[static_cast<std::size_t>(axis)] += d[static_cast<std::size_t>(axis)];
    }
    return out;
}

class ConcatKernel final : public Kernel {
  public:
    // Pieces of the gradient: nothing.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const auto adt = b.output_type(0);  // the activation type, or s32 (integer index columns)
        const int axis = axis_attr(b);
        std::vector<View> srcs;
        for (std::size_t i = 0; i < b.input_count(); ++i) {
            const memory m = b.input_plain(i, adt);
            srcs.push_back(View{m, m});
        }
        const memory dst = b.make_output(0, plain_desc(b.output_dims(0), adt));
        b.forward(run_concat(b, srcs, View{dst, dst}, axis, "fwd"));
        if (!b.needs_backward()) return;
        std::vector<MemDims> dims;
        for (std::size_t i = 0; i < b.input_count(); ++i) dims.push_back(b.input_dims(i));
        const memory dc = b.output_diff(0, plain_desc(b.output_dims(0), Dt::f32));
        const auto from = pieces(dc, dims, axis, Dt::f32, engine);
        for (std::size_t i = 0; i < b.input_count(); ++i) {
            if (!b.needs_input_grad(i)) continue;
            const View to =
                view_of(b.input_diff(i, plain_desc(dims[i], Dt::f32)), plain_desc(dims[i], Dt::f32), engine);
            b.backward(run_reorder(b, from[i].view, to.view, {from[i], to}));
        }
    }
};

class SplitKernel final : public Kernel {
  public:
    // The gradients concatenated: nothing.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const auto adt = b.context().activation_type();
        const int axis = axis_attr(b);
        std::vector<MemDims> dims;
        for (std::size_t k = 0; k < b.output_count(); ++k) dims.push_back(b.output_dims(k));
        const auto from = pieces(b.input_plain(0, adt), dims, axis, adt, engine);
        for (std::size_t k = 0; k < dims.size(); ++k) {
            const memory out = b.make_output(k, plain_desc(dims[k], adt));
            b.forward(run_reorder(b, from[k].view, out, {from[k]}));
        }
        if (!b.needs_input_grad(0)) return;
        std::vector<View> grads;
        for (std::size_t k = 0; k < dims.size(); ++k) {
            const memory d = b.output_diff(k, plain_desc(dims[k], Dt::f32));
            grads.push_back(View{d, d});
        }
        const View dx = view_of(b.input_diff(0, plain_desc(b.input_dims(0), Dt::f32)),
                                plain_desc(b.input_dims(0), Dt::f32), engine);
        b.backward(run_concat(b, grads, dx, axis, "bwd"));
    }
};

}  // namespace

std::unique_ptr<Kernel> make_concat_kernel() { return std::make_unique<ConcatKernel>(); }
std::unique_ptr<Kernel> make_split_kernel() { return std::make_unique<SplitKernel>(); }

}  // namespace psrun::nn
