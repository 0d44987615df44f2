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
    // In the primitive's format: the kernel's output 0 (make_output) when that has the conv's
    // dims, else scratch the kernel reads on (a fused pool after the conv).
    dnnl::memory dst;
};

// How build_conv_forward builds: an element-wise post-op (algorithm::undef: none; forward
// only, so not with a backward), the destination format (format_tag::any: oneDNN's choice), and
// optionally the weights and bias to read instead of the node's tensors: plain f32 memories
// ([O, I/G, (KH,) KW] and [O]) that the caller fills in its forward work before the conv runs
// (conv_bn_kernel.cpp folds a batch norm into them).
struct ConvForwardSpec {
    dnnl::algorithm post_op = dnnl::algorithm::undef;
    float alpha = 0.0f, beta = 0.0f;
    dnnl::memory::format_tag dst_tag = dnnl::memory::format_tag::any;
    dnnl::memory weights, bias;
};

// The conv of b.node() (inputs: data, w[, b]), writing b.output_type(0).
ConvForward build_conv_forward(KernelBuilder& b, const ConvForwardSpec& spec);
// Adds the backward work: reads `diff_dst` (dst's desc), writes what b wants of dL/dw, dL/db
// and dL/d(input).
void build_conv_backward(KernelBuilder& b, const ConvForward& f, const dnnl::memory& diff_dst);

}  // namespace psrun::nn
