// conv2d + relu + max_pool 2x2/2 on hand-written kernels (fusion.h picks them): AVX-512 blocks of
// 16 channels (nChw16c), or AVX2 + FMA blocks of 8 (nChw8c) where AVX-512 is absent or capped.
//
// FusedConvReluPoolKernel: kernels::FusedConv1Pool (kernels/conv1_pool.h), mnist_deep's first
// layer: one input channel, kernel 5 with same pads, stride 1, a bias, no data gradient. The
// 28x28xC activation never exists; backward routes each pooled gradient to its window's
// arg-max and writes the weight and bias gradients directly. Input plain NCHW f32; output f32
// nChw16c (nChw8c) in every precision.
//
// ConvReluBlockedPoolKernel: the convolution (ReLU a post-op) on oneDNN writing f32 nChw16c (8c),
// the pool on kernels::BlockedMaxPool (kernels/max_pool.h), whose backward also applies the
// ReLU's derivative, so the convolution skips its own ReLU backward pass over the 4x larger
// tensor (oneDNN 2.6's pooling on nChw16c spends 2-4x the time its memory traffic needs). f32.
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/kernels/conv1_pool.h"
#include "workerd/nn/kernels/max_pool.h"
#include "workerd/nn/ops/conv_kernel.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;
using Dt = memory::data_type;

namespace {

Tag blocked_tag(int block) { return block == 16 ? Tag::nChw16c : Tag::nChw8c; }
const char* block_isa(int block) { return block == 16 ? "avx512f" : "avx2+fma"; }

class FusedConvReluPoolKernel final : public Kernel {
  public:
    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        auto g = conv_geometry(b.node().attrs, b.input_info(0));
        if (!g) throw std::runtime_error(g.error().message);
        if (b.needs_input_grad(0)) throw std::logic_error("the fused conv2d+relu+max_pool computes no data gradient");
        const auto in = b.input_dims(0);
        const int n = static_cast<int>(in[0]), h = static_cast<int>(in[2]), w = static_cast<int>(in[3]);
        const int c = static_cast<int>(g->filters), k = static_cast<int>(g->window.kh);
        kernel_ = std::make_unique<kernels::FusedConv1Pool>(n, h, w, c, k);
        const memory src = b.input_as(0, memory::desc({n, 1, h, w}, Dt::f32, Tag::nchw));
        const memory weights = b.input(1), bias = b.input(2);
        const memory dst = b.make_output(0, memory::desc({n, c, h / 2, w / 2}, Dt::f32, blocked_tag(kernel_->block())));
        b.forward([this, src, weights, bias, dst] {
            kernel_->forward(
                static_cast<const float*>(src.get_data_handle()), static_cast<const float*>(weights.get_data_handle()),
                static_cast<const float*>(bias.get_data_handle()), static_cast<float*>(dst.get_data_handle()));
        });
        b.note(std::string("fwd+bwd: psrun FusedConv1Pool ") + block_isa(kernel_->block()));
        if (!b.needs_backward()) return;
        const memory ddst = b.output_diff(0, dst.get_desc());
        const memory dw = b.input_diff(1, weights.get_desc());
        const memory db = b.input_diff(2, bias.get_desc());
        b.backward([this, ddst, dst, dw, db] {
            kernel_->backward(static_cast<const float*>(ddst.get_data_handle()),
                              static_cast<const float*>(dst.get_data_handle()),
                              static_cast<float*>(dw.get_data_handle()), static_cast<float*>(db.get_data_handle()));
        });
    }

  private:
    std::unique_ptr<kernels::FusedConv1Pool> kernel_;
};

class ConvReluBlockedPoolKernel final : public Kernel {
  public:
    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        auto g = conv_geometry(b.node().attrs, b.input_info(0));
        if (!g) throw std::runtime_error(g.error().message);
        const int block = kernels::BlockedMaxPool::block_for(static_cast<int>(g->filters));
        ConvForwardSpec spec;
        spec.post_op = algorithm::eltwise_relu;
        spec.dst_tag = blocked_tag(block);
        auto f = std::make_shared<ConvForward>(build_conv_forward(b, spec));
        const auto dims = f->dst.get_desc().dims();
        if (f->dst.get_desc() != memory::desc(dims, Dt::f32, blocked_tag(block)))
            throw std::logic_error("the convolution does not write the pool's blocked f32 layout");
        const memory::dim n = dims[0], ch = dims[1], h = dims[2], w = dims[3];
        pool_ = std::make_unique<kernels::BlockedMaxPool>(static_cast<int>(n), static_cast<int>(ch),
                                                          static_cast<int>(h), static_cast<int>(w));
        b.note(std::string("max_pool fwd+bwd (and relu bwd): psrun BlockedMaxPool ") + block_isa(pool_->block()));
        const memory conv_dst = f->dst;
        const memory dst = b.make_output(0, memory::desc({n, ch, h / 2, w / 2}, Dt::f32, blocked_tag(pool_->block())));
        b.forward([this, conv_dst, dst] {
            pool_->forward(static_cast<const float*>(conv_dst.get_data_handle()),
                           static_cast<float*>(dst.get_data_handle()));
        });
        if (!b.needs_backward()) return;
        const memory ddst = b.output_diff(0, dst.get_desc());
        const memory conv_diff(conv_dst.get_desc(), b.context().engine);
        b.backward([this, ddst, dst, conv_diff] {
            pool_->backward(static_cast<const float*>(ddst.get_data_handle()),
                            static_cast<const float*>(dst.get_data_handle()),
                            static_cast<float*>(conv_diff.get_data_handle()));
        });
        build_conv_backward(b, *f, conv_diff);
    }

  private:
    std::unique_ptr<kernels::BlockedMaxPool> pool_;
};

}  // namespace

std::unique_ptr<Kernel> make_fused_conv_relu_pool_kernel() { return std::make_unique<FusedConvReluPoolKernel>(); }
std::unique_ptr<Kernel> make_conv_relu_blocked_pool_kernel() { return std::make_unique<ConvReluBlockedPoolKernel>(); }

}  // namespace psrun::nn
