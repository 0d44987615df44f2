// slice and pad as reorders between a plain tensor and a strided window of a larger one (a
// memory desc over the larger tensor's data with the window's strides and offset, no copy):
// slice reads its output from the window of its input and writes its gradient into the
// window of a zeroed input gradient; pad fills its output with its value (zeroes it) and writes its input into the
// window, and its gradient is the window of the output gradient. Forward in the activation
// type, backward in f32.
#include <memory>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"
#include "workerd/nn/ops/slice_pad.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

// The window `w` (its dims `small`) of a plain tensor of `large` dims, as a desc over that
// tensor's data.
memory::desc window_desc(const MemDims& large, const MemDims& small, const SliceWindow& w, Dt type) {
    const MemDims base = plain_strides(large);
    MemDims strides(large.size());
    std::int64_t offset = 0;
    for (std::size_t d = 0; d < large.size(); ++d) {
        strides[d] = base[d] * w.step[d];
        offset += w.start[d] * base[d];
    }
    return strided_desc(small, type, strides, offset);
}

class SlicePadKernel final : public Kernel {
  public:
    // Nothing: the backward only moves dy into (slice) or out of (pad) a window of dx.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const bool slice = b.node().op == "slice";
        // Integers (a slice of ids) move as s32, floats in the activation type.
        const auto adt = b.output_type(0) == Dt::s32 ? Dt::s32 : b.context().activation_type();
        const MemDims in = b.input_dims(0), out = b.output_dims(0);
        SliceWindow w;
        if (slice) {
            auto sw = slice_window(b.input_info(0).dims, b.node().attrs);
            if (!sw) throw std::runtime_error(sw.error().message);
            w = std::move(*sw);
        } else {
            w = pad_window(b.input_info(0).dims, b.node().attrs.at("pads").get<std::vector<std::int64_t>>());
        }
        const MemDims& large = slice ? in : out;
        const MemDims& small = slice ? out : in;
        const memory x = b.input_plain(0, adt);
        const memory y = b.make_output(0, plain_desc(out, adt));
        if (slice) {
            const View from = view_of(x, window_desc(large, small, w, adt), engine);
            b.forward(run_reorder(b, from.view, y, {from}));
        } else {
            const View to = view_of(y, window_desc(large, small, w, adt), engine);
            const float value = b.node().attrs.value("value", 0.0f);
            b.forward(value == 0.0f ? run_zero(y) : run_fill(y, value));
            b.forward(run_reorder(b, x, to.view, {to}));
        }
        b.note(slice ? "fwd: reorder from a strided window" : "fwd: zero, reorder into a strided window");
        if (!b.needs_input_grad(0)) return;
        const memory dy = b.output_diff(0, plain_desc(out, Dt::f32));
        const memory dx = b.input_diff(0, plain_desc(in, Dt::f32));
        if (slice) {
            const View to = view_of(dx, window_desc(large, small, w, Dt::f32), engine);
            b.backward(run_zero(dx));
            b.backward(run_reorder(b, dy, to.view, {to}));
        } else {
            const View from = view_of(dy, window_desc(large, small, w, Dt::f32), engine);
            const View to = view_of(dx, plain_desc(in, Dt::f32), engine);
            b.backward(run_reorder(b, from.view, to.view, {from, to}));
        }
    }
};

}  // namespace

std::unique_ptr<Kernel> make_slice_kernel() { return std::make_unique<SlicePadKernel>(); }
std::unique_ptr<Kernel> make_pad_kernel() { return std::make_unique<SlicePadKernel>(); }

}  // namespace psrun::nn
