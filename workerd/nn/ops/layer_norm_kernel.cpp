// The layer_norm kernel: oneDNN's layer_normalization forward and backward on the input as a
// plain [rows, features] matrix (the normalised dims are the last ones, so every row is one
// normalisation), scale and shift as f32 [features] views of their tensors.
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/normalization.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;
using Flags = normalization_flags;

namespace {

class LayerNormKernel final : public Kernel {
  public:
    // The input and scale, and the row statistics it keeps; not the output.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads{BackwardReads::kAllInputs, false, -1};
        reads.as_converted = BackwardReads::kAllInputs;  // every input as input_plain() gave it
        reads.keeps_output_grad = true;
        return reads;
    }

    void build(KernelBuilder& b) override {
        const Node& node = b.node();
        const NormSlots s = norm_slots(node);
        const auto& engine = b.context().engine;
        const Dt adt = b.context().activation_type();
        const auto epsilon = static_cast<float>(node.attrs.at("epsilon").get<double>());
        auto g = layer_norm_geometry(node.attrs, b.input_info(0));
        if (!g) throw std::runtime_error(g.error().message);
        const auto dims = b.input_dims(0);
        memory::dim total = 1;
        for (const auto d : dims) total *= d;
        const memory::dim features = g->features, rows = total / features;
        const memory::desc data2({rows, features}, adt, memory::format_tag::ab);
        const memory::desc vec = plain_desc({features}, Dt::f32);
        const memory::desc stat = plain_desc({rows}, Dt::f32);

        const memory src = view_of(b.input_plain(0, adt), data2, engine).view;
        Flags flags = Flags::none;
        if (s.scale >= 0) flags |= Flags::use_scale;
        if (s.bias >= 0) flags |= Flags::use_shift;
        const bool training = b.context().training;
        layer_normalization_forward::primitive_desc pd(
            layer_normalization_forward::desc(training ? prop_kind::forward_training : prop_kind::forward_inference,
                                              data2, stat, epsilon, flags),
            engine);
        b.note("fwd", pd);
        const memory mean(stat, engine), var(stat, engine);
        std::unordered_map<int, memory> args{{DNNL_ARG_SRC, src}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var}};
        memory scale, shift;
        if (s.scale >= 0)
            args.emplace(DNNL_ARG_SCALE,
                         scale = view_of(b.input_plain(static_cast<std::size_t>(s.scale), Dt::f32), vec, engine).view);
        if (s.bias >= 0)
            args.emplace(DNNL_ARG_SHIFT,
                         shift = view_of(b.input_plain(static_cast<std::size_t>(s.bias), Dt::f32), vec, engine).view);
        // dst in the activation type; the model's f32 output after bf16 work is a converted copy.
        const Dt out_type = b.output_type(0);
        const memory::desc dst_desc = plain_desc(b.output_dims(0), adt);
        const memory dst = out_type == adt ? b.make_output(0, dst_desc) : memory(dst_desc, engine);
        args.emplace(DNNL_ARG_DST, view_of(dst, data2, engine).view);
        b.forward(layer_normalization_forward(pd), args);
        memory out = dst;
        if (out_type != adt) {
            out = forward_convert(b, dst, plain_desc(b.output_dims(0), out_type));
            b.alias_output(0, out);
        }
        if (!b.needs_backward()) return;

        const memory diff_dst =
            view_of(backward_convert(b, b.output_diff(0, out.get_desc()), dst_desc), data2, engine).view;
        const bool params = s.scale >= 0 || s.bias >= 0;
        layer_normalization_backward::primitive_desc bwd(
            layer_normalization_backward::desc(params ? prop_kind::backward : prop_kind::backward_data, data2, data2,
                                               stat, epsilon, flags),
            engine, pd);
        b.note("bwd", bwd);
        std::unordered_map<int, memory> bargs{
            {DNNL_ARG_SRC, src}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var}, {DNNL_ARG_DIFF_DST, diff_dst}};
        if (s.scale >= 0) bargs.emplace(DNNL_ARG_SCALE, scale);
        if (s.bias >= 0) bargs.emplace(DNNL_ARG_SHIFT, shift);
        std::vector<View> views;
        const memory full =
            b.needs_input_grad(0) ? b.input_diff(0, plain_desc(dims, adt)) : memory(plain_desc(dims, adt), engine);
        views.push_back(view_of(full, data2, engine));
        bargs.emplace(DNNL_ARG_DIFF_SRC, views.back().view);
        auto grad = [&](int slot, int arg) {
            const auto i = static_cast<std::size_t>(slot);
            const memory m =
                b.needs_input_grad(i) ? b.input_diff(i, plain_desc(b.input_dims(i), Dt::f32)) : memory(vec, engine);
            views.push_back(view_of(m, vec, engine));
            bargs.emplace(arg, views.back().view);
        };
        if (s.scale >= 0) grad(s.scale, DNNL_ARG_DIFF_SCALE);
        if (s.bias >= 0) grad(s.bias, DNNL_ARG_DIFF_SHIFT);
        const layer_normalization_backward prim(bwd);
        b.backward(run_primitive(b, prim, bargs, views));
    }
};

}  // namespace

std::unique_ptr<Kernel> make_layer_norm_kernel() { return std::make_unique<LayerNormKernel>(); }

}  // namespace psrun::nn
