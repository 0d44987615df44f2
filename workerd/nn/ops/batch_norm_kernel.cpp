// The batch_norm kernel: oneDNN's batch_normalization on the input in its producer's format
// (converted only to the activation type), scale and shift as f32 [C]. A following relu (the
// fusion pass groups batch_norm + relu) is oneDNN's fuse_norm_relu: the training forward keeps
// the ReLU's mask in a workspace the backward reads, so the pair reads and writes the
// activation once instead of twice each way.
//   - A training network builds two forwards: the training one with the batch's statistics
//     (what a training step runs; afterwards a loop writes old - new of the running
//     statistics into the state deltas) and forward_inference over the running statistics
//     (use_global_stats; what a forward that does not train runs; it writes no delta). The
//     backward is for the batch statistics (the gradients a training step needs).
//   - A forward-only network uses the running statistics only.
// The batch's statistics are this kernel's own (batch_stats.h: double sums, shifted by a
// value of the channel), handed to a forward_training primitive with use_global_stats and to
// the backward. oneDNN 2.6's bnorm_jit (AVX2 and SSE4.1 seen) sums them in f32 per thread:
// off by up to 5e-5 of the mean and 7e-5 of the variance on 16 MNIST images after a conv
// with bias (most outputs equal: the background), about 3e-5 of each batch norm's output, an
// error that grows layer by layer (ResNet-20's last block 1.8e-4). Outputs that close to a
// following ReLU's kink then switch sides: 2 of them moved a shift's gradient 0.6% and
// ResNet-20's up to 7% against PyTorch (psrun model check, test/onnx/check_gradients.py).
// oneDNN's variance is the population one; the running variance is kept unbiased (PyTorch's
// running_var), so the update scales the batch variance by n / (n - 1), n = N x the spatial
// size (1 when n = 1).
// A rank-3 input [N, C, W] (BatchNorm1d after a Conv1d) is given to oneDNN as [N, C, 1, W]:
// oneDNN 2.6 runs only its reference batch norm on rank-3 tensors (20-60x slower here), its jit
// one on rank 4. The views share the tensors' data and are re-pointed before each run.
#include <algorithm>
#include <cstdint>
#include <memory>
#include <optional>
#include <stdexcept>
#include <vector>

#include "common/wire_precision.h"
#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/batch_stats.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/normalization.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;
using Flags = normalization_flags;

namespace {

using batch_norm::batch_stats;
using batch_norm::channel_layout;
using batch_norm::ChannelLayout;

class BatchNormKernel final : public Kernel {
  public:
    // The input (or its conversion) and the batch statistics and relu workspace it keeps; not
    // the output.
    BackwardReads backward_reads(const std::vector<const Node*>& nodes, const EngineContext&) const override {
        // oneDNN's backward takes the output's gradient as diff_dst and only reads it; a fused
        // relu's backward would change it in place.
        BackwardReads reads{BackwardReads::kAllInputs, false, -1};
        reads.keeps_output_grad = nodes.size() == 1;
        return reads;
    }

    void build(KernelBuilder& b) override {
        const Node& node = b.node();
        const NormSlots s = norm_slots(node);
        const auto& engine = b.context().engine;
        const Dt adt = b.context().activation_type();
        const auto epsilon = static_cast<float>(node.attrs.at("epsilon").get<double>());
        const auto momentum = static_cast<float>(node.attrs.at("momentum").get<double>());
        const auto dims = b.input_dims(0);
        const memory::dim channels = dims[1];
        memory::dim per_channel = 1;
        for (std::size_t i = 0; i < dims.size(); ++i)
            if (i != 1) per_channel *= dims[i];

        // Rank 3 as rank 4 (see the header): oneDNN's descs of a tensor, and back.
        const bool rank3 = dims.size() == 3;
        const memory::dims dims4 = rank3 ? memory::dims{dims[0], dims[1], 1, dims[2]} : dims;
        auto as4 = [&](const memory::desc& d) { return rank3 ? d.reshape(dims4) : d; };
        auto as3 = [&](const memory::desc& d) { return rank3 ? d.reshape(dims) : d; };
        std::vector<View> views;  // every 4-d view below, re-pointed at its tensor before a run
        auto view4 = [&](const memory& m) {
            if (!rank3) return m;
            views.push_back(view_of(m, as4(m.get_desc()), engine));
            return views.back().view;
        };

        memory src = b.input(0);
        // batch_stats reads f32 or bf16 in the formats channel_layout describes (every format
        // oneDNN's convolutions, pools and eltwise pick); anything else becomes plain first.
        if (src.get_desc().data_type() != adt || !channel_layout(src.get_desc())) src = b.input_plain(0, adt);
        const bool relu = b.nodes().size() == 2;
        Flags flags = relu ? Flags::fuse_norm_relu : Flags::none;
        if (s.scale >= 0) flags |= Flags::use_scale;
        if (s.bias >= 0) flags |= Flags::use_shift;
        const memory::desc stat = plain_desc({channels}, Dt::f32);
        const memory src4 = view4(src);
        std::unordered_map<int, memory> common{{DNNL_ARG_SRC, src4}};
        if (s.scale >= 0) common.emplace(DNNL_ARG_SCALE, b.input_plain(static_cast<std::size_t>(s.scale), Dt::f32));
        if (s.bias >= 0) common.emplace(DNNL_ARG_SHIFT, b.input_plain(static_cast<std::size_t>(s.bias), Dt::f32));

        // Over the running statistics.
        batch_normalization_forward::primitive_desc global(
            batch_normalization_forward::desc(prop_kind::forward_inference, src4.get_desc(), epsilon,
                                              flags | Flags::use_global_stats),
            engine);
        b.note("fwd-global", global);
        const memory::desc dst_desc = as3(global.dst_desc());
        // The output, or (the model's f32 output after bf16 work) converted into it.
        const memory dst =
            b.output_type(0) == dst_desc.data_type() ? b.make_output(0, dst_desc) : b.scratch(dst_desc, false);
        const memory dst4 = view4(dst);
        auto global_args = common;
        global_args.emplace(DNNL_ARG_DST, dst4);
        global_args.emplace(DNNL_ARG_MEAN, b.input(static_cast<std::size_t>(s.mean)));
        global_args.emplace(DNNL_ARG_VARIANCE, b.input(static_cast<std::size_t>(s.var)));
        const batch_normalization_forward global_fwd(global);
        if (!b.context().training) {
            b.forward(run_primitive(b, global_fwd, global_args, views));
            set_output(b, dst);
            return;
        }

        // Over the batch's statistics (batch_stats, then a training forward that takes them as
        // given), then the running statistics' deltas. `train` (statistics computed by oneDNN)
        // is never run: it is the backward's hint.
        batch_normalization_forward::primitive_desc train(
            batch_normalization_forward::desc(prop_kind::forward_training, src4.get_desc(), epsilon, flags), engine);
        batch_normalization_forward::primitive_desc train_given(
            batch_normalization_forward::desc(prop_kind::forward_training, src4.get_desc(), epsilon,
                                              flags | Flags::use_global_stats),
            engine);
        b.note("fwd", train_given);
        if (relu && train_given.workspace_desc() != train.workspace_desc())
            throw std::logic_error("batch_norm + relu: the workspaces with and without given statistics differ");
        const memory mean(stat, engine), var(stat, engine);
        auto train_args = common;
        train_args.emplace(DNNL_ARG_DST, dst4);
        train_args.emplace(DNNL_ARG_MEAN, mean);
        train_args.emplace(DNNL_ARG_VARIANCE, var);
        const memory workspace = relu ? b.scratch(train.workspace_desc(), false) : memory();
        if (relu) train_args.emplace(DNNL_ARG_WORKSPACE, workspace);
        const batch_normalization_forward train_fwd(train_given);
        const ChannelLayout layout = *channel_layout(src.get_desc());
        const auto lanes = static_cast<std::size_t>(layout.groups * layout.lanes);
        const auto part = std::make_shared<std::vector<double>>(2 * lanes * static_cast<std::size_t>(layout.n));
        const auto shift = std::make_shared<std::vector<float>>(lanes);
        const bool bf16_src = src.get_desc().data_type() == Dt::bf16;
        const memory running_mean = b.input(static_cast<std::size_t>(s.mean));
        const memory running_var = b.input(static_cast<std::size_t>(s.var));
        const memory delta_mean = b.state_delta(static_cast<std::size_t>(s.mean));
        const memory delta_var = b.state_delta(static_cast<std::size_t>(s.var));
        const float unbias =
            per_channel > 1 ? static_cast<float>(per_channel) / static_cast<float>(per_channel - 1) : 1.0f;
        const StepState* step = &b.step();
        b.forward(rebased(views, [=, stream = b.context().stream]() mutable {
            if (!step->training) {
                global_fwd.execute(stream, global_args);
                return;
            }
            stream.wait();  // the producer's work is done
            auto* bm_out = static_cast<float*>(mean.get_data_handle());
            auto* bv_out = static_cast<float*>(var.get_data_handle());
            const void* x = src.get_data_handle();
            if (bf16_src)
                batch_stats(layout, static_cast<const std::uint16_t*>(x), part->data(), shift->data(), bm_out, bv_out);
            else batch_stats(layout, static_cast<const float*>(x), part->data(), shift->data(), bm_out, bv_out);
            train_fwd.execute(stream, train_args);
            stream.wait();
            const auto* rm = static_cast<const float*>(running_mean.get_data_handle());
            const auto* rv = static_cast<const float*>(running_var.get_data_handle());
            const auto* bm = static_cast<const float*>(mean.get_data_handle());
            const auto* bv = static_cast<const float*>(var.get_data_handle());
            auto* dm = static_cast<float*>(delta_mean.get_data_handle());
            auto* dv = static_cast<float*>(delta_var.get_data_handle());
            for (memory::dim c = 0; c < channels; ++c) {
                dm[c] = momentum * (rm[c] - bm[c]);
                dv[c] = momentum * (rv[c] - bv[c] * unbias);
            }
        }));
        const memory out = set_output(b, dst);
        if (!b.needs_backward()) return;

        const memory diff_out = b.output_diff(0, out.get_desc());
        const memory diff_dst = view4(backward_convert(b, diff_out, dst.get_desc()));
        const bool params = s.scale >= 0 || s.bias >= 0;
        batch_normalization_backward::primitive_desc bwd(
            batch_normalization_backward::desc(params ? prop_kind::backward : prop_kind::backward_data, dst4.get_desc(),
                                               src4.get_desc(), epsilon, flags),
            engine, train);
        b.note("bwd", bwd);
        std::unordered_map<int, memory> args{
            {DNNL_ARG_SRC, src4}, {DNNL_ARG_MEAN, mean}, {DNNL_ARG_VARIANCE, var}, {DNNL_ARG_DIFF_DST, diff_dst}};
        if (s.scale >= 0) args.emplace(DNNL_ARG_SCALE, common.at(DNNL_ARG_SCALE));
        if (s.bias >= 0) args.emplace(DNNL_ARG_SHIFT, common.at(DNNL_ARG_SHIFT));
        if (relu) args.emplace(DNNL_ARG_WORKSPACE, workspace);
        args.emplace(DNNL_ARG_DIFF_SRC, b.needs_input_grad(0) ? view4(b.input_diff(0, as3(bwd.diff_src_desc())))
                                                              : memory(bwd.diff_src_desc(), engine));
        auto grad = [&](int slot) {
            const auto i = static_cast<std::size_t>(slot);
            return b.needs_input_grad(i) ? b.input_diff(i, stat) : memory(stat, engine);
        };
        if (s.scale >= 0) args.emplace(DNNL_ARG_DIFF_SCALE, grad(s.scale));
        if (s.bias >= 0) args.emplace(DNNL_ARG_DIFF_SHIFT, grad(s.bias));
        b.backward(run_primitive(b, batch_normalization_backward(bwd), args, views));
    }

  private:
    // The output: `dst` itself (made by make_output), or (the model's f32 output after bf16
    // work) a copy converted after the forward work added so far.
    static memory set_output(KernelBuilder& b, const memory& dst) {
        if (b.output_type(0) == dst.get_desc().data_type()) return dst;
        const memory out = forward_convert(b, dst, plain_desc(b.output_dims(0), b.output_type(0)));
        b.alias_output(0, out);
        return out;
    }
};

}  // namespace

std::unique_ptr<Kernel> make_batch_norm_kernel() { return std::make_unique<BatchNormKernel>(); }

}  // namespace psrun::nn
