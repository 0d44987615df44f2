// matmul on oneDNN's matmul primitive, which broadcasts batch dims of size 1 in either source.
// Forward: the inputs plain in the activation type (padded with leading 1s to the output's
// rank), the output plain in its own type. Backward (in f32 on plain layouts) as two matmuls
// over transposed memory descriptors (strides swapped, no copy): dA = dC B^T, dB = A^T dC,
// each summed over the batch dims its input broadcasts along. Where the other input has no
// batch dims of its own the batch folds into the rows: dB = A^T dC as one [K, rows] x
// [rows, P] product (a shared weight matrix's gradient without a per-example buffer).
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

// The plain layout of `dims` read with its last two dims swapped.
memory::desc transposed(const MemDims& dims, Dt type) {
    MemDims t = dims, s = plain_strides(dims);
    const std::size_t r = dims.size();
    std::swap(t[r - 1], t[r - 2]);
    std::swap(s[r - 1], s[r - 2]);
    return memory::desc(t, type, s);
}

MemDims batch_of(const MemDims& d) { return MemDims(d.begin(), d.end() - 2); }
bool all_ones(const MemDims& d) {
    for (const auto x : d)
        if (x != 1) return false;
    return true;
}

matmul make_matmul(KernelBuilder& b, const memory::desc& src, const memory::desc& wei, const memory::desc& dst,
                   const char* what) {
    matmul::primitive_desc pd(matmul::desc(src, wei, dst), b.context().engine);
    b.note(what, pd);
    return matmul(pd);
}

class MatmulKernel final : public Kernel {
  public:
    // Each input's gradient is the output's times the other input: both inputs, not the output.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads{BackwardReads::kAllInputs, false, -1};
        reads.as_converted = BackwardReads::kAllInputs;  // both as input_plain() gave them
        reads.input_for = {0b10, 0b01};                  // dA = dC B^T, dB = A^T dC
        reads.keeps_output_grad = true;
        return reads;
    }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const auto adt = b.context().activation_type();
        out_ = b.output_dims(0);
        for (std::size_t i = 0; i < 2; ++i) dims_[i] = padded(b.input_dims(i), out_.size());
        const View a = view_of(b.input_plain(0, adt), plain_desc(dims_[0], adt), engine);
        const View w = view_of(b.input_plain(1, adt), plain_desc(dims_[1], adt), engine);
        const memory dst = b.make_output(0, plain_desc(out_, b.output_type(0)));
        b.forward(run_primitive(b, make_matmul(b, a.view.get_desc(), w.view.get_desc(), dst.get_desc(), "fwd"),
                                {{DNNL_ARG_SRC, a.view}, {DNNL_ARG_WEIGHTS, w.view}, {DNNL_ARG_DST, dst}}, {a, w}));
        if (!b.needs_backward()) return;
        const memory dc = b.output_diff(0, plain_desc(out_, Dt::f32));
        for (std::size_t i = 0; i < 2; ++i)
            if (b.needs_input_grad(i)) build_grad(b, i, dc);
    }

  private:
    // dL/d(input i) from dC.
    void build_grad(KernelBuilder& b, std::size_t i, const memory& dc) {
        const auto& engine = b.context().engine;
        const std::size_t r = out_.size();
        const MemDims& self = dims_[i];
        const MemDims& other_dims = dims_[1 - i];
        const memory other = b.input_plain(1 - i, Dt::f32);
        const memory base = b.input_diff(i, plain_desc(b.input_dims(i), Dt::f32));
        const std::int64_t m = out_[r - 2], p = out_[r - 1], k = dims_[0][r - 1];
        // A shared second matrix (no batch dims of its own) against a full batch: fold the
        // batch into the rows, dB [K, P] = A^T [K, rows] x dC [rows, P].
        if (i == 1 && r > 2 && all_ones(batch_of(self)) && batch_of(other_dims) == batch_of(out_)) {
            const std::int64_t rows = element_count(batch_of(out_)) * m;
            const View at = view_of(other, transposed({rows, k}, Dt::f32), engine);
            const View d2 = view_of(dc, plain_desc({rows, p}, Dt::f32), engine);
            const View g = view_of(base, plain_desc({k, p}, Dt::f32), engine);
            b.backward(run_primitive(
                b, make_matmul(b, at.view.get_desc(), d2.view.get_desc(), g.view.get_desc(), "bwd b (folded)"),
                {{DNNL_ARG_SRC, at.view}, {DNNL_ARG_WEIGHTS, d2.view}, {DNNL_ARG_DST, g.view}}, {at, d2, g}));
            return;
        }
        // General: the full-size gradient [batch of C, rows, cols], then summed to input i's dims.
        MemDims full = batch_of(out_);
        full.push_back(i == 0 ? m : k);
        full.push_back(i == 0 ? k : p);
        const bool direct = full == self;
        const memory tmp = direct ? memory() : b.scratch(plain_desc(full, Dt::f32), true);
        const View target = direct ? view_of(base, plain_desc(full, Dt::f32), engine) : View{tmp, tmp};
        const View o = view_of(other, transposed(other_dims, Dt::f32), engine);
        const View d = view_of(dc, plain_desc(out_, Dt::f32), engine);
        if (i == 0)  // dA = dC x B^T
            b.backward(run_primitive(
                b, make_matmul(b, d.view.get_desc(), o.view.get_desc(), target.view.get_desc(), "bwd a"),
                {{DNNL_ARG_SRC, d.view}, {DNNL_ARG_WEIGHTS, o.view}, {DNNL_ARG_DST, target.view}}, {d, o, target}));
        else  // dB = A^T x dC
            b.backward(run_primitive(
                b, make_matmul(b, o.view.get_desc(), d.view.get_desc(), target.view.get_desc(), "bwd b"),
                {{DNNL_ARG_SRC, o.view}, {DNNL_ARG_WEIGHTS, d.view}, {DNNL_ARG_DST, target.view}}, {d, o, target}));
        if (!direct) b.backward(sum_to(b, tmp, base, self));
    }

    MemDims out_;
    MemDims dims_[2];
};

}  // namespace

std::unique_ptr<Kernel> make_matmul_kernel() { return std::make_unique<MatmulKernel>(); }

}  // namespace psrun::nn
