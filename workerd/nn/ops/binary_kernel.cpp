// The binary kernels (add, sub, mul, div) on oneDNN's binary primitive, which broadcasts its
// second source only: when the first input is the broadcast one, add and mul swap their
// inputs, sub swaps and negates (a post-op), and div (or two broadcast inputs) first expands
// the first input into the output with a zero-stride reorder and divides in place.
// Equal shapes keep the first input's format (a residual add of blocked convolution outputs
// stays blocked), and a following relu (ResNet's relu(block + shortcut); the fusion pass groups
// them) is the primitive's post-op, its backward applied to dC first; broadcasting runs on plain
// layouts.
// Backward (oneDNN has none for binary): in f32 on plain layouts, dA = dC (add, sub),
// dC * B (mul), dC / B (div), dB = dC, -dC, dC * A, -(dC / B) * C, each summed over the axes
// its input broadcasts along (sum_to; a product and its sum in one pass where the other factor
// is full-size: sum_product_to).
// Integers (add, sub, mul, div, mod, fmod of two integer values: position ids from a mask, ids
// hashed into buckets) are a hand loop in 64 bits on plain s32 layouts, stored as s32; no
// gradient. A divisor of 0 gives a quotient of 0 and a remainder of a (never a trap).
#include <cstdint>
#include <memory>
#include <stdexcept>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/broadcast_loop.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

enum class Kind { kAdd, kSub, kMul, kDiv, kMod, kFmod };

Kind kind_of(const std::string& op) {
    if (op == "add") return Kind::kAdd;
    if (op == "sub") return Kind::kSub;
    if (op == "mul") return Kind::kMul;
    if (op == "div") return Kind::kDiv;
    if (op == "mod") return Kind::kMod;
    if (op == "fmod") return Kind::kFmod;
    throw std::logic_error(op + " is not a binary kind");
}

// One integer element, in 64 bits (see the file comment for a divisor of 0).
std::int64_t integer_op(Kind kind, std::int64_t u, std::int64_t v) {
    switch (kind) {
        case Kind::kAdd: return u + v;
        case Kind::kSub: return u - v;
        case Kind::kMul: return u * v;
        case Kind::kDiv: return v == 0 ? 0 : u / v;
        case Kind::kFmod: return v == 0 ? u : u % v;
        case Kind::kMod: {
            if (v == 0) return u;
            const std::int64_t r = u % v;
            return r != 0 && ((r < 0) != (v < 0)) ? r + v : r;
        }
    }
    return 0;
}

algorithm algorithm_of(Kind k) {
    switch (k) {
        case Kind::kAdd: return algorithm::binary_add;
        case Kind::kSub: return algorithm::binary_sub;
        case Kind::kMul: return algorithm::binary_mul;
        case Kind::kDiv: return algorithm::binary_div;
        case Kind::kMod:
        case Kind::kFmod: break;  // integers only: the hand loop
    }
    return algorithm::binary_add;
}

primitive_attr negate() {
    post_ops po;
    po.append_eltwise(1.0f, algorithm::eltwise_linear, -1.0f, 0.0f);
    primitive_attr attr;
    attr.set_post_ops(po);
    return attr;
}

primitive_attr relu_attr() {
    post_ops po;
    po.append_eltwise(1.0f, algorithm::eltwise_relu, 0.0f, 0.0f);
    primitive_attr attr;
    attr.set_post_ops(po);
    return attr;
}

binary make_binary(KernelBuilder& b, algorithm alg, const memory::desc& s0, const memory::desc& s1,
                   const memory::desc& dst, bool negated, const char* what, bool relu = false) {
    binary::primitive_desc pd(binary::desc(alg, s0, s1, dst),
                              negated ? negate()
                              : relu  ? relu_attr()
                                      : primitive_attr(),
                              b.context().engine);
    b.note(what, pd);
    return binary(pd);
}

class BinaryKernel final : public Kernel {
  public:
    // add, sub: nothing (a relu post-op: the output); mul: both inputs; div: the divisor and the
    // output. add, sub and mul may write over their first input (oneDNN's binary takes dst ==
    // src0; the broadcast path only where that input is full-size), add and sub with the relu
    // post-op too (build_same: not as one primitive where the format pads its blocks).
    BackwardReads backward_reads(const std::vector<const Node*>& nodes, const EngineContext&) const override {
        const bool relu = nodes.size() == 2;
        switch (kind_of(nodes.front()->op)) {
            case Kind::kAdd: return BackwardReads{0, relu, 0, -1, 0b11};
            case Kind::kSub: return BackwardReads{0, relu, 0, -1, 0b01};  // the second input's is negated
            case Kind::kMul: {                                            // dA = dC B, dB = dC A
                BackwardReads reads{BackwardReads::kAllInputs, false, 0};
                reads.input_for = {0b10, 0b01};
                reads.as_converted = BackwardReads::kAllInputs;  // as input_plain(i, f32) gave them
                return reads;
            }
            case Kind::kDiv: {  // dA = dC / B, dB = -dA C: never A; C only for dB
                BackwardReads reads{0b10, true, -1};
                reads.outputs_for = 0b10;
                reads.as_converted = 0b10;
                return reads;
            }
            case Kind::kMod:
            case Kind::kFmod: return BackwardReads::nothing();  // integers: no gradient
        }
        return {};
    }

    void build(KernelBuilder& b) override {
        kind_ = kind_of(b.node().op);
        if (b.output_type(0) == Dt::s32) {
            build_integers(b);
            return;
        }
        relu_ = b.nodes().size() == 2;
        out_ = b.output_dims(0);
        const std::size_t rank = out_.size();
        dims_[0] = padded(b.input_dims(0), rank);
        dims_[1] = padded(b.input_dims(1), rank);
        if (b.input_dims(0) == out_ && b.input_dims(1) == out_) build_same(b);
        else if (relu_) throw std::logic_error("binary + relu with broadcasting");
        else build_broadcast(b);
        if (b.needs_backward()) build_backward(b);
    }

  private:
    void build_integers(KernelBuilder& b) {
        const auto ix = std::make_shared<const BroadcastIndex>(b.output_dims(0),
                                                               std::vector<MemDims>{b.input_dims(0), b.input_dims(1)});
        const memory x0 = b.input_plain(0, Dt::s32), x1 = b.input_plain(1, Dt::s32);
        const memory y = b.make_output(0, plain_desc(b.output_dims(0), Dt::s32));
        b.forward([x0, x1, y, ix, kind = kind_] {
            const auto* p = static_cast<const std::int32_t*>(x0.get_data_handle());
            const auto* q = static_cast<const std::int32_t*>(x1.get_data_handle());
            auto* out = static_cast<std::int32_t*>(y.get_data_handle());
            const std::int64_t n = ix->size();
#pragma omp parallel for schedule(static)
            for (std::int64_t e = 0; e < n; ++e) {
                const std::int64_t u = p[ix->at(0, e)], v = q[ix->at(1, e)];
                out[e] = static_cast<std::int32_t>(integer_op(kind, u, v));
            }
        });
        b.note("fwd: hand integer " + b.node().op);
    }

    // Equal shapes: the first input's format for everything.
    void build_same(KernelBuilder& b) {
        const auto adt = b.context().activation_type();
        const memory::desc want = with_type(b.input(0).get_desc(), adt);
        const memory s0 = b.input_as(0, want), s1 = b.input_as(1, want);
        dst_ = b.make_output(0, with_type(want, b.output_type(0)));
        // oneDNN 2.6's binary with an eltwise post-op, run in place (dst over src 0) on a blocked
        // format with padded blocks (4 channels in nChw16c), leaves src 0 unchanged in every
        // block that has padding (seen standalone for 4 to 20 channels; without the post-op, or
        // out of place, or unpadded, it is right). There the relu runs after, in place: the
        // same bits (checked, f32 and bf16).
        const bool split = relu_ && dst_.get_data_handle() == s0.get_data_handle() && pads_blocks(dst_.get_desc());
        b.forward(make_binary(b, algorithm_of(kind_), want, want, dst_.get_desc(), false, "fwd", relu_ && !split),
                  {{DNNL_ARG_SRC_0, s0}, {DNNL_ARG_SRC_1, s1}, {DNNL_ARG_DST, dst_}});
        if (split) {
            eltwise_forward::primitive_desc pd(
                eltwise_forward::desc(prop_kind::forward_inference, algorithm::eltwise_relu, dst_.get_desc(), 0.0f,
                                      0.0f),
                b.context().engine);
            b.note("fwd relu (in place)", pd);
            b.forward(eltwise_forward(pd), {{DNNL_ARG_SRC, dst_}, {DNNL_ARG_DST, dst_}});
        }
    }

    // Whether `d`'s layout pads a dimension (a blocked format over a count not a multiple of
    // its block).
    static bool pads_blocks(const memory::desc& d) {
        for (int i = 0; i < d.data.ndims; ++i)
            if (d.data.padded_dims[i] != d.data.dims[i]) return true;
        return false;
    }

    void build_broadcast(KernelBuilder& b) {
        const auto adt = b.context().activation_type();
        const auto& engine = b.context().engine;
        const memory s0 = b.input_plain(0, adt), s1 = b.input_plain(1, adt);
        const View v0 = view_of(s0, plain_desc(dims_[0], adt), engine),
                   v1 = view_of(s1, plain_desc(dims_[1], adt), engine);
        dst_ = b.make_output(0, plain_desc(out_, b.output_type(0)));
        const algorithm alg = algorithm_of(kind_);
        const bool full0 = dims_[0] == out_, full1 = dims_[1] == out_;
        if (full0) {
            b.forward(run_primitive(
                b, make_binary(b, alg, v0.view.get_desc(), v1.view.get_desc(), dst_.get_desc(), false, "fwd"),
                {{DNNL_ARG_SRC_0, v0.view}, {DNNL_ARG_SRC_1, v1.view}, {DNNL_ARG_DST, dst_}}, {v0, v1}));
        } else if (full1 && kind_ != Kind::kDiv) {  // b op a, negated for sub
            b.forward(run_primitive(b,
                                    make_binary(b, alg, v1.view.get_desc(), v0.view.get_desc(), dst_.get_desc(),
                                                kind_ == Kind::kSub, "fwd (swapped)"),
                                    {{DNNL_ARG_SRC_0, v1.view}, {DNNL_ARG_SRC_1, v0.view}, {DNNL_ARG_DST, dst_}},
                                    {v0, v1}));
        } else {  // a expanded into the output, then the op in place
            const View expanded = view_of(s0, broadcast_desc(dims_[0], out_, adt), engine);
            b.forward(run_reorder(b, expanded.view, dst_, {expanded}));
            b.forward(run_primitive(
                b, make_binary(b, alg, dst_.get_desc(), v1.view.get_desc(), dst_.get_desc(), false, "fwd (expanded)"),
                {{DNNL_ARG_SRC_0, dst_}, {DNNL_ARG_SRC_1, v1.view}, {DNNL_ARG_DST, dst_}}, {v1}));
        }
    }

    // dL/dA and dL/dB, for the inputs that need them.
    void build_backward(KernelBuilder& b) {
        const bool want0 = b.needs_input_grad(0), want1 = b.needs_input_grad(1);
        if (!want0 && !want1) return;
        if ((kind_ == Kind::kAdd || kind_ == Kind::kSub) && b.input_dims(0) == out_ && b.input_dims(1) == out_) {
            // Same shapes: the gradients are dC and +-dC, in dC's format.
            const memory ddst = b.output_diff(0, dst_.get_desc());
            if (relu_) add_relu_backward(b, dst_, ddst);
            // An input's gradient may be dC's own buffer (buffer_lifetimes.h share_gradients, never
            // sub's second): nothing to copy.
            for (std::size_t i = 0; i < 2; ++i) {
                if (!(i == 0 ? want0 : want1)) continue;
                const memory d = b.input_diff(i, ddst.get_desc());
                if (d.get_data_handle() == ddst.get_data_handle()) continue;
                b.backward(run_reorder(b, ddst, d, {}, i == 1 && kind_ == Kind::kSub ? -1.0f : 1.0f));
            }
            return;
        }
        const auto& engine = b.context().engine;
        const memory::desc full = plain_desc(out_, Dt::f32);
        const memory dd = b.output_diff(0, full);
        auto diff_base = [&](std::size_t i) { return b.input_diff(i, plain_desc(b.input_dims(i), Dt::f32)); };
        // The f32 plain copy of input i at its padded dims.
        auto operand = [&](std::size_t i) {
            return view_of(b.input_plain(i, Dt::f32), plain_desc(dims_[i], Dt::f32), engine);
        };
        // Where the full-size gradient of input i goes: straight into its gradient when it does
        // not broadcast, else backward scratch summed into it after.
        auto target = [&](std::size_t i, const memory& base) -> View {
            if (dims_[i] == out_ && base) return view_of(base, full, engine);
            const memory tmp = b.scratch(full, true);
            return View{tmp, tmp};
        };
        auto finish = [&](std::size_t i, const View& t, const memory& base) {
            if (dims_[i] != out_) b.backward(sum_to(b, t.view, base, dims_[i]));
        };
        switch (kind_) {
            case Kind::kAdd:
            case Kind::kSub:
                if (want0) b.backward(sum_to(b, dd, diff_base(0), dims_[0]));
                if (want1) b.backward(sum_to(b, dd, diff_base(1), dims_[1], kind_ == Kind::kSub ? -1.0f : 1.0f));
                return;
            case Kind::kMul:
                for (std::size_t i = 0; i < 2; ++i) {
                    if (!b.needs_input_grad(i)) continue;
                    const View other = operand(1 - i);
                    const memory base = diff_base(i);
                    if (dims_[i] != out_ && dims_[1 - i] == out_) {  // dB = sum(dC * A) in one pass
                        b.backward(sum_product_to(View{dd, dd}, other, base, dims_[i]));
                        continue;
                    }
                    const View t = target(i, base);
                    b.backward(run_primitive(
                        b, make_binary(b, algorithm::binary_mul, full, other.view.get_desc(), full, false, "bwd"),
                        {{DNNL_ARG_SRC_0, dd}, {DNNL_ARG_SRC_1, other.view}, {DNNL_ARG_DST, t.view}}, {other, t}));
                    finish(i, t, base);
                }
                return;
            case Kind::kDiv: {
                // dA_full = dC / B; dB = -(dA_full * C), each summed to its input's shape.
                const View divisor = operand(1);
                const memory base0 = want0 ? diff_base(0) : memory();
                const View t0 = target(0, base0);
                b.backward(run_primitive(
                    b, make_binary(b, algorithm::binary_div, full, divisor.view.get_desc(), full, false, "bwd a"),
                    {{DNNL_ARG_SRC_0, dd}, {DNNL_ARG_SRC_1, divisor.view}, {DNNL_ARG_DST, t0.view}}, {divisor, t0}));
                if (want0) finish(0, t0, base0);
                if (!want1) return;
                const memory c = forward_convert(b, dst_, full);
                const memory base1 = diff_base(1);
                if (dims_[1] != out_) {  // dB = -sum(dA_full * C) in one pass
                    b.backward(sum_product_to(t0, View{c, c}, base1, dims_[1], -1.0f));
                    return;
                }
                const View t1 = target(1, base1);
                b.backward(run_primitive(b, make_binary(b, algorithm::binary_mul, full, full, full, true, "bwd b"),
                                         {{DNNL_ARG_SRC_0, t0.view}, {DNNL_ARG_SRC_1, c}, {DNNL_ARG_DST, t1.view}},
                                         {t0, t1}));
                finish(1, t1, base1);
                return;
            }
            case Kind::kMod:
            case Kind::kFmod: return;  // integers only (infer_binary): no gradient
        }
    }

    Kind kind_ = Kind::kAdd;
    bool relu_ = false;  // a relu post-op (equal shapes, add or sub)
    MemDims out_;
    MemDims dims_[2];
    memory dst_;
};

}  // namespace

std::unique_ptr<Kernel> make_binary_kernel() { return std::make_unique<BinaryKernel>(); }

}  // namespace psrun::nn
