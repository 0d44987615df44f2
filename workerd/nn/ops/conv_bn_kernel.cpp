// conv2d + batch_norm (+ relu or clip) in a network that does not train (eval, predict, the
// chief's evaluations): the batch norm folded into the convolution. Over the running
// statistics a batch norm is an affine map per channel, so with s = scale / sqrt(var + eps)
//   w'[o, ...] = w[o, ...] * s[o],   b'[o] = (b[o] - mean[o]) * s[o] + shift[o]
// (b = 0 without a conv bias, scale = 1 and shift = 0 where the batch norm has none) and the
// conv with w', b' computes both nodes; a following relu or clip becomes its post-op. The
// folded tensors are recomputed from the parameter buffer at the start of every forward
// (O x I/G x (KD x) KH x KW multiply-adds, next to N x that x OH x OW for the conv), so a network built
// once sees the parameters as they are when it runs. fusion.cpp picks the pattern only where
// the context does not train: a training forward needs the batch's statistics.
#include <cmath>
#include <memory>
#include <stdexcept>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/conv_kernel.h"
#include "workerd/nn/ops/normalization.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

class ConvBnKernel final : public Kernel {
  public:
    void build(KernelBuilder& b) override {
        if (b.context().training) throw std::logic_error("conv2d + batch_norm folding in a training network");
        const auto& nodes = b.nodes();
        const Node& conv = *nodes[0];
        const Node& bn = *nodes[1];
        auto g = conv_geometry(conv.attrs, b.input_info(0));
        if (!g) throw std::runtime_error(g.error().message);
        // The group's inputs: the conv's (x, w[, b]), then the batch norm's after its data input.
        const std::size_t first_bn = conv.inputs.size();
        const NormSlots slots = norm_slots(bn);
        auto bn_input = [&](int slot) {
            return slot < 0 ? memory() : b.input(first_bn + static_cast<std::size_t>(slot) - 1);
        };
        const memory scale = bn_input(slots.scale), shift = bn_input(slots.bias);
        const memory mean = bn_input(slots.mean), var = bn_input(slots.var);
        const memory weights = b.input(1);
        const memory conv_bias = g->bias ? b.input(2) : memory();
        const auto epsilon = static_cast<float>(bn.attrs.at("epsilon").get<double>());

        const auto& engine = b.context().engine;
        const memory::dim filters = g->filters;
        const memory::dim per_filter = g->in_channels / g->groups * g->window.kd * g->window.kh * g->window.kw;
        ConvForwardSpec spec;
        const auto weight_dims = conv_weight_dims(*g);
        spec.weights = memory(plain_desc(memory::dims(weight_dims.begin(), weight_dims.end()), Dt::f32), engine);
        spec.bias = memory(plain_desc({filters}, Dt::f32), engine);
        if (nodes.size() == 3) {
            const Node& act = *nodes[2];
            if (act.op == "relu") {
                spec.post_op = algorithm::eltwise_relu;
            } else {
                spec.post_op = algorithm::eltwise_clip_v2;
                spec.alpha = static_cast<float>(act.attrs.at("min").get<double>());
                spec.beta = static_cast<float>(act.attrs.at("max").get<double>());
            }
        }
        // The handles are read when the fold runs: the parameter buffer is the Network's.
        b.forward([=, w_out = spec.weights, b_out = spec.bias] {
            auto in = [](const memory& m) { return m ? static_cast<const float*>(m.get_data_handle()) : nullptr; };
            const float *w = in(weights), *cb = in(conv_bias), *sc = in(scale), *sh = in(shift);
            const float *mu = in(mean), *v = in(var);
            auto* wf = static_cast<float*>(w_out.get_data_handle());
            auto* bf = static_cast<float*>(b_out.get_data_handle());
            for (memory::dim o = 0; o < filters; ++o) {
                const float s = (sc ? sc[o] : 1.0f) / std::sqrt(v[o] + epsilon);
                for (memory::dim i = 0; i < per_filter; ++i) wf[o * per_filter + i] = w[o * per_filter + i] * s;
                bf[o] = ((cb ? cb[o] : 0.0f) - mu[o]) * s + (sh ? sh[o] : 0.0f);
            }
        });
        b.note("batch_norm folded into the convolution's weights and bias");
        build_conv_forward(b, spec);  // makes the output
    }
};

}  // namespace

std::unique_ptr<Kernel> make_conv_bn_kernel() { return std::make_unique<ConvBnKernel>(); }

}  // namespace psrun::nn
