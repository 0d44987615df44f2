// The equal, less, greater, not, is_nan, is_inf and cast kernels: hand loops on plain layouts, the inputs read
// as f32 (integers converted exactly below 2^24), integer outputs written as s32 and float ones
// in f32 (then converted to the output's type). Their gradient is 0: a float input that needs one
// (a mask computed from activations) gets zeros, so that gradients summed into it stay fresh.
#include <cmath>
#include <cstdint>
#include <memory>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/broadcast_loop.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

enum class MaskMode { kEqual, kLess, kGreater, kNot, kIsNan, kIsInf, kCast };

MaskMode mode_of(const std::string& op) {
    if (op == "equal") return MaskMode::kEqual;
    if (op == "less") return MaskMode::kLess;
    if (op == "greater") return MaskMode::kGreater;
    if (op == "not") return MaskMode::kNot;
    if (op == "is_nan") return MaskMode::kIsNan;
    if (op == "is_inf") return MaskMode::kIsInf;
    return MaskMode::kCast;
}

class MaskKernel final : public Kernel {
  public:
    // Backward writes zeros: it reads nothing.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const MaskMode mode = mode_of(b.node().op);
        const bool negative = mode == MaskMode::kIsInf && b.node().attrs.at("negative").get<bool>();
        const bool positive = mode == MaskMode::kIsInf && b.node().attrs.at("positive").get<bool>();
        const auto& engine = b.context().engine;
        std::vector<MemDims> dims;
        std::vector<memory> ins;
        for (std::size_t i = 0; i < b.input_count(); ++i) {
            dims.push_back(b.input_dims(i));
            ins.push_back(b.input_plain(i, Dt::f32));
        }
        const auto ix = std::make_shared<const BroadcastIndex>(b.output_dims(0), dims);
        const Dt out_type = b.output_type(0);
        const bool to_int = out_type == Dt::s32;
        const memory::desc f32 = plain_desc(b.output_dims(0), Dt::f32);
        const memory y = to_int || out_type == Dt::f32 ? b.make_output(0, plain_desc(b.output_dims(0), out_type))
                                                       : memory(f32, engine);
        b.forward([ins, y, ix, mode, to_int, negative, positive] {
            const float* a = static_cast<const float*>(ins[0].get_data_handle());
            const float* c = ins.size() > 1 ? static_cast<const float*>(ins[1].get_data_handle()) : nullptr;
            void* out = y.get_data_handle();
            const std::int64_t n = ix->size();
#pragma omp parallel for schedule(static)
            for (std::int64_t e = 0; e < n; ++e) {
                const float x = a[ix->at(0, e)];
                float r = 0.0f;
                switch (mode) {
                    case MaskMode::kEqual: r = x == c[ix->at(1, e)] ? 1.0f : 0.0f; break;
                    case MaskMode::kLess: r = x < c[ix->at(1, e)] ? 1.0f : 0.0f; break;
                    case MaskMode::kGreater: r = x > c[ix->at(1, e)] ? 1.0f : 0.0f; break;
                    case MaskMode::kNot: r = x == 0.0f ? 1.0f : 0.0f; break;
                    case MaskMode::kIsNan: r = std::isnan(x) ? 1.0f : 0.0f; break;
                    case MaskMode::kIsInf: r = std::isinf(x) && (x < 0 ? negative : positive) ? 1.0f : 0.0f; break;
                    case MaskMode::kCast: r = to_int ? std::trunc(x) : x; break;
                }
                if (to_int) static_cast<std::int32_t*>(out)[e] = static_cast<std::int32_t>(r);
                else static_cast<float*>(out)[e] = r;
            }
        });
        if (!to_int && out_type != Dt::f32)
            b.forward(run_reorder(b, y, b.make_output(0, plain_desc(b.output_dims(0), out_type))));
        b.note("fwd: hand " + b.node().op);
        for (std::size_t i = 0; i < b.input_count(); ++i)
            if (b.needs_input_grad(i)) b.backward(run_zero(b.input_diff(i, plain_desc(b.input_dims(i), Dt::f32))));
    }
};

}  // namespace

std::unique_ptr<Kernel> make_mask_kernel() { return std::make_unique<MaskKernel>(); }

}  // namespace psrun::nn
