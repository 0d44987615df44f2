#include "workerd/nn/conv_relu_blocked_pool_layer.h"

#include <stdexcept>

namespace psrun::nn {

using dnnl::memory;
using Tag = memory::format_tag;
using Dt = memory::data_type;

bool ConvReluBlockedPoolLayer::matches(std::span<const LayerSpec> specs, int index,
                                       const LayerContext& context) {
    const auto i = static_cast<std::size_t>(index);
    if (i + 3 > specs.size() || context.precision != Precision::kF32) return false;
    const LayerSpec& c = specs[i];
    const LayerSpec& p = specs[i + 2];
    if (c.kind != LayerKind::kConv2d || specs[i + 1].kind != LayerKind::kRelu ||
        p.kind != LayerKind::kMaxPool)
        return false;
    if (p.kernel.h != 2 || p.kernel.w != 2 || p.stride.h != 2 || p.stride.w != 2 || p.pads != Pads{})
        return false;
    return kernels::BlockedMaxPool::supported(static_cast<int>(c.output.channels),
                                              static_cast<int>(c.output.height),
                                              static_cast<int>(c.output.width));
}

ConvReluBlockedPoolLayer::ConvReluBlockedPoolLayer(std::span<const LayerSpec> specs, int index,
                                                   const LayerContext& context,
                                                   std::size_t param_offset)
    : Layer(specs, index, context, param_offset) {
    if (specs.size() != 3) throw std::logic_error("conv2d+relu+max_pool covers three specs");
    conv_ = std::make_unique<Conv2dLayer>(specs.first(2), index, context, param_offset,
                                          Conv2dLayer::Options{Tag::nChw16c, true});
}

ConvReluBlockedPoolLayer::~ConvReluBlockedPoolLayer() = default;

void ConvReluBlockedPoolLayer::set_gradient_buffer(std::span<float> grads) {
    Layer::set_gradient_buffer(grads);
    conv_->set_gradient_buffer(grads);
}

void ConvReluBlockedPoolLayer::build(const memory& src, const memory& diff_src) {
    const LayerSpec& c = spec();
    const memory::dim n = ctx_.batch, ch = c.output.channels, h = c.output.height, w = c.output.width;
    conv_->setup(src, diff_src, params_, grads_);
    for (const auto& line : conv_->implementations()) note("conv2d+relu " + line);
    note("max_pool fwd+bwd (and relu bwd): psrun BlockedMaxPool avx512f");
    const memory conv_dst = conv_->dst();
    if (conv_dst.get_desc() != md({n, ch, h, w}, Dt::f32, Tag::nChw16c))
        throw std::logic_error("the convolution does not write f32 nChw16c");
    pool_ = std::make_unique<kernels::BlockedMaxPool>(static_cast<int>(n), static_cast<int>(ch),
                                                      static_cast<int>(h), static_cast<int>(w));
    allocate_output(md({n, ch, h / 2, w / 2}, Dt::f32, Tag::nChw16c));
    fwd_ops_.push_back([this] { conv_->forward(true); });
    fwd_ops_.push_back([this, conv_dst] {
        pool_->forward(static_cast<const float*>(conv_dst.get_data_handle()),
                       static_cast<float*>(dst_.get_data_handle()));
    });
    if (!ctx_.training) return;
    const memory conv_diff_dst = conv_->diff_dst();
    bwd_ops_.push_back([this, conv_diff_dst] {
        pool_->backward(static_cast<const float*>(diff_dst_.get_data_handle()),
                        static_cast<const float*>(dst_.get_data_handle()),
                        static_cast<float*>(conv_diff_dst.get_data_handle()));
    });
    bwd_ops_.push_back([this] { conv_->backward(); });
}

}  // namespace psrun::nn
