// conv2d: oneDNN convolution (SAME pads from the description, per side), bias, and a following
// ReLU fused as a post-op (then the layer covers both specs; its backward applies ReLU's
// derivative from the saved output, in place on diff_dst, before the convolution's).
// Weights [O, I, KH, KW] oihw and bias [O] are read from the flat parameter buffer and
// reordered to the primitive's format (in bf16: converted) when that differs; their
// gradients are written in the same plain layouts (f32). Contract: workerd/nn/layer.h.
#pragma once

#include "workerd/nn/layer.h"

namespace psrun::nn {

class Conv2dLayer final : public Layer {
public:
    using Layer::Layer;

protected:
    void build(const dnnl::memory& src, const dnnl::memory& diff_src) override;
};

}  // namespace psrun::nn
