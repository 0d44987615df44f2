// max_pool and avg_pool: oneDNN pooling with the description's window, stride and TF SAME
// pads. Max pooling ignores padding (oneDNN pads with -inf); average pooling divides by the
// window elements inside the image (TF's avg_pool with SAME: pooling_avg_exclude_padding).
// The output format follows oneDNN's choice for the input's; max pooling keeps a workspace
// (the arg-max) for backward. No parameters. Contract: workerd/nn/layer.h.
#pragma once

#include "workerd/nn/layer.h"

namespace psrun::nn {

class PoolLayer final : public Layer {
public:
    using Layer::Layer;

protected:
    void build(const dnnl::memory& src, const dnnl::memory& diff_src) override;
};

}  // namespace psrun::nn
