// conv2d on oneDNN, in two halves that the conv2d kernel and the fused conv + relu + pool
// kernel (kernels that own a convolution) share: the forward primitive with its source,
// weights and destination memories, then its backward (weights, bias and data gradients, each
// only where the builder wants it).
#pragma once

#include <oneapi/dnnl/dnnl.hpp>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/conv.h"

namespace psrun::nn {

struct ConvForward {
    ConvGeometry geometry;
    dnnl::convolution_forward::primitive_desc pd;
    dnnl::memory src;      // the input as the primitive reads it
    dnnl::memory weights;  // the weights as the primitive reads them
    dnnl::memory dst;      // allocated here, in the primitive's format (not an output yet)
};

// The conv of b.node() (inputs: data, w[, b]) with `relu` as a post-op, writing `dst_tag`
// (format_tag::any: oneDNN's choice) in b.output_type(0).
ConvForward build_conv_forward(KernelBuilder& b, bool relu, dnnl::memory::format_tag dst_tag);
// Adds the backward work: reads `diff_dst` (dst's desc), writes what b wants of dL/dw, dL/db
// and dL/d(input).
void build_conv_backward(KernelBuilder& b, const ConvForward& f, const dnnl::memory& diff_dst);

}  // namespace psrun::nn
