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
    struct Options {
        // The format of dst() (and diff_dst()); any: oneDNN's choice. A consumer that reads a
        // fixed layout (a hand kernel) asks for it here.
        dnnl::memory::format_tag dst_format = dnnl::memory::format_tag::any;
        // With a fused ReLU: backward() skips ReLU's derivative; whoever writes diff_dst()
        // has applied it already (kernels::BlockedMaxPool does, from the pooled output).
        bool relu_backward_by_consumer = false;
    };

    using Layer::Layer;
    Conv2dLayer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
                std::size_t param_offset, Options options);

protected:
    void build(const dnnl::memory& src, const dnnl::memory& diff_src) override;

private:
    Options options_;
};

}  // namespace psrun::nn
