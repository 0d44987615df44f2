// quantize_linear and dequantize_linear (quantize.cpp) by hand, in f32 on the plain layout
// (converted to the output's type where that is bf16): per element, the scale and zero point of
// its index along the node's axis (one for the whole tensor when there is one scale).
#include <cmath>
#include <memory>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

class QuantizeKernel final : public Kernel {
  public:
    // Backward reads the input (quantize: where it lies in range), not the output.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads{BackwardReads::kAllInputs, false};
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const Node& node = b.node();
        const bool quantize = node.op == "quantize_linear";
        const auto scale = node.attrs.at("scale").get<std::vector<float>>();
        std::vector<float> zero;
        for (const auto z : node.attrs.at("zero_point").get<std::vector<std::int64_t>>())
            zero.push_back(static_cast<float>(z));
        // The range q is clamped to (dequantize_linear: unused).
        const float lo = quantize ? static_cast<float>(node.attrs.at("min").get<std::int64_t>()) : 0.0f;
        const float hi = quantize ? static_cast<float>(node.attrs.at("max").get<std::int64_t>()) : 0.0f;
        const MemDims dims = b.input_dims(0);
        const auto axis = static_cast<std::size_t>(node.attrs.at("axis").get<std::int64_t>());
        std::int64_t inner = 1;
        for (std::size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
        const auto channels = static_cast<std::int64_t>(scale.size());
        const auto n = element_count(dims);
        const auto& engine = b.context().engine;
        const memory::desc f32 = plain_desc(dims, Dt::f32);
        const memory x = b.input_plain(0, Dt::f32);
        const Dt out_type = b.output_type(0);
        const memory y = out_type == Dt::f32 ? b.make_output(0, f32) : memory(f32, engine);
        // The channel of element i.
        const auto channel = [inner, channels](std::int64_t i) {
            return channels == 1 ? 0 : static_cast<std::size_t>((i / inner) % channels);
        };
        b.forward([=] {
            const float* in = static_cast<const float*>(x.get_data_handle());
            float* out = static_cast<float*>(y.get_data_handle());
#pragma omp parallel for schedule(static)
            for (std::int64_t i = 0; i < n; ++i) {
                const std::size_t c = channel(i);
                out[i] = quantize ? std::fmin(std::fmax(std::nearbyint(in[i] / scale[c]) + zero[c], lo), hi)
                                  : (in[i] - zero[c]) * scale[c];
            }
        });
        if (out_type != Dt::f32) {
            const memory dst = b.make_output(0, plain_desc(dims, out_type));
            b.forward(run_reorder(b, y, dst));
        }
        b.note("fwd: hand " + node.op + " (f32)");
        if (!b.needs_input_grad(0)) return;
        const memory dy = b.output_diff(0, f32);
        const memory dx = b.input_diff(0, f32);
        b.backward([=] {
            const float* in = static_cast<const float*>(x.get_data_handle());
            const float* g = static_cast<const float*>(dy.get_data_handle());
            float* out = static_cast<float*>(dx.get_data_handle());
#pragma omp parallel for schedule(static)
            for (std::int64_t i = 0; i < n; ++i) {
                const std::size_t c = channel(i);
                if (!quantize) {
                    out[i] = g[i] * scale[c];
                    continue;
                }
                const float q = std::nearbyint(in[i] / scale[c]) + zero[c];
                out[i] = q >= lo && q <= hi ? g[i] / scale[c] : 0.0f;
            }
        });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_quantize_kernel() { return std::make_unique<QuantizeKernel>(); }

}  // namespace psrun::nn
