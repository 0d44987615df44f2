// relu, tanh, sigmoid: oneDNN eltwise forward in the input's format (converted to the
// activation type only when the input is the f32 network input in bf16 mode), and backward
// from the saved output (eltwise_*_use_dst_for_bwd). A relu right after conv2d or dense is
// fused into that layer instead (the Network never builds it alone then). No parameters.
// Contract: workerd/nn/layer.h.
#pragma once

#include "workerd/nn/layer.h"

namespace psrun::nn {

class ActivationLayer final : public Layer {
public:
    using Layer::Layer;

protected:
    void build(const dnnl::memory& src, const dnnl::memory& diff_src) override;
};

}  // namespace psrun::nn
