#include "workerd/nn/conv_relu_pool_layer.h"

#include <stdexcept>

namespace psrun::nn {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

namespace {

bool is_pool_2x2_stride_2(const LayerSpec& p) {
    return p.kind == LayerKind::kMaxPool && p.kernel.h == 2 && p.kernel.w == 2 && p.stride.h == 2 &&
           p.stride.w == 2 && p.pads.top == 0 && p.pads.bottom == 0 && p.pads.left == 0 &&
           p.pads.right == 0;
}

}  // namespace

bool FusedConvReluPoolLayer::matches(std::span<const LayerSpec> specs, int index,
                                     const LayerContext& context) {
    const auto i = static_cast<std::size_t>(index);
    if (i + 3 > specs.size()) return false;
    const LayerSpec& c = specs[i];
    if (c.kind != LayerKind::kConv2d || specs[i + 1].kind != LayerKind::kRelu ||
        !is_pool_2x2_stride_2(specs[i + 2]))
        return false;
    const auto k = c.kernel.h, half = k / 2;
    if (c.input.flat || c.input.channels != 1 || c.kernel.w != k || c.stride.h != 1 ||
        c.stride.w != 1 || !c.bias || c.pads.top != half || c.pads.bottom != half ||
        c.pads.left != half || c.pads.right != half || c.output.height != c.input.height ||
        c.output.width != c.input.width)
        return false;
    // The kernel computes no gradient w.r.t. its input.
    if (context.training && index != 0) return false;
    if (context.precision == Precision::kBf16 &&
        (i + 3 >= specs.size() || specs[i + 3].kind != LayerKind::kConv2d))
        return false;
    return kernels::FusedConv1Pool::supported(static_cast<int>(c.input.height),
                                              static_cast<int>(c.input.width),
                                              static_cast<int>(c.filters), static_cast<int>(k));
}

FusedConvReluPoolLayer::FusedConvReluPoolLayer(std::span<const LayerSpec> specs, int index,
                                               const LayerContext& context, std::size_t param_offset)
    : Layer(specs, index, context, param_offset) {
    if (specs.size() != 3) throw std::logic_error("conv2d+relu+max_pool covers three specs");
}

FusedConvReluPoolLayer::~FusedConvReluPoolLayer() = default;

void FusedConvReluPoolLayer::build(const memory& src_in, const memory& diff_src) {
    if (diff_src) throw std::logic_error("the fused conv2d+relu+max_pool computes no data gradient");
    const LayerSpec& s = spec();
    const memory::dim n = ctx_.batch;
    const int h = static_cast<int>(s.input.height), w = static_cast<int>(s.input.width);
    const int c = static_cast<int>(s.filters), k = static_cast<int>(s.kernel.h);
    kernel_ = std::make_unique<kernels::FusedConv1Pool>(static_cast<int>(n), h, w, c, k);
    // The kernel reads plain N x H x W f32 (the network input already is).
    const memory src = convert(fwd_ops_, as_image(src_in), md({n, 1, h, w}, Dt::f32, Tag::nchw));
    allocate_output(md({n, c, h / 2, w / 2}, Dt::f32, Tag::nChw16c));
    const std::size_t bias_offset = param_offset_ + static_cast<std::size_t>(c) * k * k;
    fwd_ops_.push_back([this, src, bias_offset] {
        kernel_->forward(static_cast<const float*>(src.get_data_handle()), params_.data() + param_offset_,
                         params_.data() + bias_offset, static_cast<float*>(dst_.get_data_handle()));
    });
    note("fwd+bwd: psrun FusedConv1Pool avx512f");
    if (!ctx_.training) return;
    // grads_ is read at run time: set_gradient_buffer() repoints it.
    bwd_ops_.push_back([this, bias_offset] {
        kernel_->backward(static_cast<const float*>(diff_dst_.get_data_handle()),
                          static_cast<const float*>(dst_.get_data_handle()), grads_.data() + param_offset_,
                          grads_.data() + bias_offset);
    });
}

}  // namespace psrun::nn
