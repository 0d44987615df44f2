// Which kernels compute a graph: a pass over the nodes in order that groups patterns into
// fused kernels (one kernel computing several nodes) and gives every other node the kernel its
// kind registers (kernel_registry.cpp). A group's inner values are never materialised, so a
// pattern only matches where each inner value has its group's next node as its only reader and
// is not the model's output. Patterns, first match wins:
//   - hand kernels (NetworkOptions::hand_kernels, AVX-512F): conv2d + relu + max_pool 2x2/2
//     with one input channel, kernel 5 same, a bias and no data gradient
//     (FusedConvReluPoolKernel); else, in f32, conv2d + relu + max_pool 2x2/2 with filters a
//     multiple of 16 and an even output (ConvReluBlockedPoolKernel);
//   - in a network that does not train: conv2d + batch_norm (+ relu or clip), the batch norm
//     folded into the convolution (ops/conv_bn_kernel.cpp);
//   - conv2d, dense, or add/sub without broadcasting + relu: ReLU as a oneDNN post-op;
//     batch_norm + relu: oneDNN's fuse_norm_relu.
#pragma once

#include <cstddef>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "workerd/nn/kernel.h"

namespace psrun::nn {

struct KernelGroup {
    std::vector<std::size_t> nodes;  // model node indices, consecutive in graph order
    std::unique_ptr<Kernel> kernel;
};

struct FusionQuery {
    const ModelDescription& model;
    const EngineContext& context;
    bool hand_kernels = true;
    // The nodes that read a value (indices, ascending) and whether it needs a gradient.
    std::function<const std::vector<std::size_t>&(const std::string&)> readers;
    std::function<bool(const std::string&)> needs_grad;
};

// Throws std::runtime_error for a kind without a kernel.
std::vector<KernelGroup> plan_kernels(const FusionQuery& query);

// The registered kernel of a kind (kernel_registry.cpp); nullptr when none.
std::unique_ptr<Kernel> make_kernel(const std::string& kind);
// Kinds with a registered kernel (tests check every schema has one).
std::vector<std::string> kernel_kinds();

}  // namespace psrun::nn
