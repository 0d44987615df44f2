// quantize_linear and dequantize_linear (quantize.cpp) by hand (hand_eltwise.h): per element,
// the scale and zero point of its index along the node's axis (one for the whole tensor when
// there is one scale).
#include <cmath>
#include <memory>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/hand_eltwise.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

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
        const auto scale = node.attrs.at("scale").get<std::vector<float>>();
        std::vector<float> zero;
        for (const auto z : node.attrs.at("zero_point").get<std::vector<std::int64_t>>())
            zero.push_back(static_cast<float>(z));
        const MemDims dims = b.input_dims(0);
        const auto axis = static_cast<std::size_t>(node.attrs.at("axis").get<std::int64_t>());
        std::int64_t inner = 1;
        for (std::size_t d = axis + 1; d < dims.size(); ++d) inner *= dims[d];
        const auto channels = static_cast<std::int64_t>(scale.size());
        // The channel of element i.
        const auto channel = [inner, channels](std::int64_t i) {
            return channels == 1 ? 0 : static_cast<std::size_t>((i / inner) % channels);
        };
        if (node.op == "dequantize_linear") {
            build_hand_eltwise(
                b, [=](std::int64_t i, float v) { return (v - zero[channel(i)]) * scale[channel(i)]; },
                [=](std::int64_t i, float) { return scale[channel(i)]; });
            return;
        }
        // The range q is clamped to; the gradient passes where round(x / s) + z lies in it.
        const auto lo = static_cast<float>(node.attrs.at("min").get<std::int64_t>());
        const auto hi = static_cast<float>(node.attrs.at("max").get<std::int64_t>());
        const auto unclamped = [=](std::int64_t i, float v) {
            const std::size_t c = channel(i);
            return std::nearbyint(v / scale[c]) + zero[c];
        };
        build_hand_eltwise(
            b, [=](std::int64_t i, float v) { return std::fmin(std::fmax(unclamped(i, v), lo), hi); },
            [=](std::int64_t i, float v) {
                const float q = unclamped(i, v);
                return q >= lo && q <= hi ? 1.0f / scale[channel(i)] : 0.0f;
            });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_quantize_kernel() { return std::make_unique<QuantizeKernel>(); }

}  // namespace psrun::nn
