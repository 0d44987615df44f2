// dropout: inverted dropout. Training with keep_prob < 1: each element is kept with
// probability keep_prob and scaled by 1/keep_prob, else zeroed; inference (or keep_prob 1):
// identity. The mask is counter-based (SplitMix64 of the step seed, the layer's ordinal among
// the model's dropout layers and the element's position in the buffer), so a seed names the
// same mask on every run with the same formats, and backward recomputes it instead of storing
// it. The first dropout layer draws the masks the engine before this one (mnist_deep's fixed
// model) drew for the same seed and buffer layout ({N, 1024} nc). The output keeps the input's
// format (copied into the layer's own buffer). No parameters. Contract: workerd/nn/layer.h.
#pragma once

#include "workerd/nn/layer.h"

namespace psrun::nn {

class DropoutLayer final : public Layer {
public:
    // ordinal: how many dropout layers come before this one in the model.
    DropoutLayer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
                 std::size_t param_offset, int ordinal);

    void forward(bool training) override;
    void backward() override;
    void set_step_seed(std::uint64_t seed) override { seed_ = seed; }

protected:
    void build(const dnnl::memory& src, const dnnl::memory& diff_src) override;

private:
    // out[i] = in[i] * mask(i) (mask(i) in {0, 1/keep}) or a copy when !masked.
    void apply(const dnnl::memory& in, const dnnl::memory& out, bool masked) const;

    dnnl::memory src_, diff_src_;
    int ordinal_;
    std::uint64_t seed_ = 0;
    bool last_training_ = false;
};

}  // namespace psrun::nn
