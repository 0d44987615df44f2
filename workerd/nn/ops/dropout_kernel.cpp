// The dropout kernel: a counter-based mask on the plain layout (so a mask depends on the step's
// seed, the layer's name and the element's logical index, never on the formats oneDNN picks),
// hand-written (oneDNN 2.6 has no dropout). The identity kernel: its output is its input; the
// stop_gradient kernel's too, with a zero gradient for the input.
#include <cstring>
#include <memory>
#include <string>

#include "common/fnv1a.h"
#include "common/rng.h"
#include "common/wire_precision.h"
#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/counter_random.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

// out = in * mask / keep; keep iff a 32-bit uniform < keep * 2^32. Element i's uniform is half
// of the 64 random bits of pair i / 2 (low half for even i): each element computes its pair's
// bits, so the loop is element-wise and vectorizes (AVX-512: 8 pairs' hashes per instruction).
template <class T>
void masked_scale(const T* in, T* out, std::size_t count, std::uint64_t base, double keep) {
    const float scale = static_cast<float>(1.0 / keep);
    const auto threshold = static_cast<std::uint64_t>(keep * 4294967296.0);
#pragma omp parallel for simd schedule(static)
    for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t r = counter_bits(base, i / 2);
        const std::uint64_t bits = (i & 1) != 0 ? r >> 32 : r & 0xffffffffull;
        const float v = load_element(in, i) * scale;
        store_element(out, i, bits < threshold ? v : 0.0f);
    }
}

class DropoutKernel final : public Kernel {
  public:
    // The mask is drawn again from the step's seed: nothing; element-wise, so it may write over
    // its input.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads{0, false, 0};
    }

    void build(KernelBuilder& b) override {
        keep_ = b.node().attrs.at("keep_prob").get<double>();
        stream_ = psrun::fnv1a_64(b.node().name);  // the layer's name keys its stream of masks
        const Dt adt = b.context().activation_type();
        const memory src = b.input_plain(0, adt);
        const memory dst = b.make_output(0, src.get_desc());
        const StepState* step = &b.step();
        b.forward([this, src, dst, step] {
            masked_ = step->training && keep_ < 1.0;
            apply(src, dst, step->seed);
        });
        if (!b.needs_input_grad(0)) return;
        const memory ddst = b.output_diff(0, src.get_desc());
        const memory dsrc = b.input_diff(0, src.get_desc());
        b.backward([this, ddst, dsrc, step] { apply(ddst, dsrc, step->seed); });
    }

  private:
    void apply(const memory& in, const memory& out, std::uint64_t seed) const {
        const std::size_t bytes = in.get_desc().get_size();
        if (!masked_) {
            if (out.get_data_handle() != in.get_data_handle())  // in place: nothing to do
                std::memcpy(out.get_data_handle(), in.get_data_handle(), bytes);
            return;
        }
        const std::uint64_t base = psrun::Rng(seed, stream_).next();
        if (in.get_desc().data_type() == Dt::bf16)
            masked_scale(static_cast<const std::uint16_t*>(in.get_data_handle()),
                         static_cast<std::uint16_t*>(out.get_data_handle()), bytes / 2, base, keep_);
        else
            masked_scale(static_cast<const float*>(in.get_data_handle()), static_cast<float*>(out.get_data_handle()),
                         bytes / 4, base, keep_);
    }

    double keep_ = 1.0;
    std::uint64_t stream_ = 0;
    bool masked_ = false;  // the last forward's
};

class IdentityKernel final : public Kernel {
  public:
    // Nothing; the output is the input.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads{0, false, -1, 0};
    }

    void build(KernelBuilder& b) override {
        const memory& src = b.input(0);
        b.alias_output(0, src);
        if (!b.needs_input_grad(0)) return;
        const memory ddst = b.output_diff(0, src.get_desc());
        const memory dsrc = b.input_diff(0, src.get_desc());
        if (ddst.get_data_handle() == dsrc.get_data_handle()) return;
        b.backward(
            [ddst, dsrc] { std::memcpy(dsrc.get_data_handle(), ddst.get_data_handle(), ddst.get_desc().get_size()); });
    }
};

// The output is the input; the input's gradient is 0 (x.detach()).
class StopGradientKernel final : public Kernel {
  public:
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads{0, false, -1, 0};
    }

    void build(KernelBuilder& b) override {
        b.alias_output(0, b.input(0));
        if (b.needs_input_grad(0)) b.backward(run_zero(b.input_diff(0, plain_desc(b.input_dims(0), Dt::f32))));
    }
};

}  // namespace

std::unique_ptr<Kernel> make_dropout_kernel() { return std::make_unique<DropoutKernel>(); }
std::unique_ptr<Kernel> make_identity_kernel() { return std::make_unique<IdentityKernel>(); }
std::unique_ptr<Kernel> make_stop_gradient_kernel() { return std::make_unique<StopGradientKernel>(); }

}  // namespace psrun::nn
