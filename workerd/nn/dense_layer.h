// dense: oneDNN inner product on {N, in_features}, bias, and a following ReLU fused as a
// post-op (as conv2d_layer.h). An image input is flattened in TF's NHWC order, feature
// i = (h * W + w) * C + c, so that the weights [units, in_features] (oi) are used exactly as
// they go on the wire: the source is reordered into an NHWC buffer (a no-op when the producer
// already writes NHWC) that the inner product reads as {N, H*W*C}; the data gradient goes
// back the same way. f32 uses the plain oi weights in place; bf16 lets oneDNN pick the weight
// format (converted from the f32 master weights every forward) and the weight gradient's
// (reordered to plain oi after it): brgemm kernels (the fixed mnist_deep model's blocked fc1 weights before), whose
// bf16 weight gradient measured 3x faster than gemm's on plain weights. Contract:
// workerd/nn/layer.h.
#pragma once

#include "workerd/nn/layer.h"

namespace psrun::nn {

class DenseLayer final : public Layer {
public:
    // output_type: the data type of dst() (the network asks for f32 logits in bf16 mode).
    DenseLayer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
               std::size_t param_offset, dnnl::memory::data_type output_type);

protected:
    void build(const dnnl::memory& src, const dnnl::memory& diff_src) override;

private:
    dnnl::memory::data_type output_type_;
};

}  // namespace psrun::nn
