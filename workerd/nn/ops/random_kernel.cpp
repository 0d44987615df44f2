// The random kernel: noise drawn per element from counter-based bits (counter_random.h) on the
// plain layout, f32 or bf16, hand-written (oneDNN 2.6 has no random primitive). normal: Box-Muller
// on two 24-bit uniforms of one element's 64 bits (|z| <= 5.8); uniform: low + (high - low) * u.
#include <cmath>
#include <cstdint>
#include <memory>
#include <numbers>

#include "common/fnv1a.h"
#include "common/rng.h"
#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/counter_random.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

constexpr float kTwo24 = 1.0f / 16777216.0f;  // 2^-24

template <class T>
void draw(T* out, std::size_t count, std::uint64_t base, bool normal, float a, float b) {
    constexpr float two_pi = 2.0f * std::numbers::pi_v<float>;
#pragma omp parallel for simd schedule(static)
    for (std::size_t i = 0; i < count; ++i) {
        const std::uint64_t r = counter_bits(base, i);
        const float u = static_cast<float>(r >> 40) * kTwo24;  // [0, 1)
        float v;
        if (normal) {
            const float u1 = static_cast<float>((r >> 40) + 1) * kTwo24;  // (0, 1]
            const float u2 = static_cast<float>(r & 0xffffffull) * kTwo24;
            v = a + b * std::sqrt(-2.0f * std::log(u1)) * std::cos(two_pi * u2);
        } else {
            v = a + (b - a) * u;
        }
        store_element(out, i, v);
    }
}

class RandomKernel final : public Kernel {
  public:
    // Its input's gradient is 0: the backward reads nothing.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const auto& attrs = b.node().attrs;
        const bool normal = attrs.at("distribution") == "normal";
        const float first = static_cast<float>(attrs.at(normal ? "mean" : "low").get<double>());
        const float second = static_cast<float>(attrs.at(normal ? "scale" : "high").get<double>());
        const std::uint64_t stream = psrun::fnv1a_64(b.node().name);  // the layer's name keys its noise
        const memory y = b.make_output(0, plain_desc(b.output_dims(0), b.output_type(0)));
        const StepState* step = &b.step();
        b.forward([y, step, stream, normal, first, second] {
            const std::uint64_t base = psrun::Rng(step->seed, stream).next();
            const std::size_t bytes = y.get_desc().get_size();
            if (y.get_desc().data_type() == Dt::bf16)
                draw(static_cast<std::uint16_t*>(y.get_data_handle()), bytes / 2, base, normal, first, second);
            else draw(static_cast<float*>(y.get_data_handle()), bytes / 4, base, normal, first, second);
        });
        if (b.needs_input_grad(0)) b.backward(run_zero(b.input_diff(0, plain_desc(b.input_dims(0), Dt::f32))));
    }
};

}  // namespace

std::unique_ptr<Kernel> make_random_kernel() { return std::make_unique<RandomKernel>(); }

}  // namespace psrun::nn
