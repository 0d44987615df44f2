// The lstm, gru and rnn kernel: oneDNN's rnn primitives (lstm, gru, lbr_gru, vanilla_rnn with
// tanh or relu; forward_training with
// a workspace, and backward), one layer, any direction. Every forward first gathers the
// node's tensors (rnn.h: PyTorch's or ONNX's layout and gate order) into oneDNN's gate order in
// plain f32 (ldgoi weights, ldgo bias: b_ih + b_hh, LBR-GRU's hidden bias of n apart), then
// reorders the weights into the formats and type the primitive picked. Backward zeroes the
// diff weights (oneDNN accumulates into them), runs the primitive and scatters the diff
// weights and bias back into the tensors' gradients in their own layout. Y with two directions
// and the sequence first is a strided reorder of oneDNN's [L, N, dirs * H] into ONNX's
// [L, dirs, N, H]. In bf16, data and weights are bf16, the bias and LSTM's cell states f32,
// and the gradients f32.
#include <array>
#include <cstring>
#include <memory>
#include <stdexcept>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/ops.h"
#include "workerd/nn/ops/rnn.h"

namespace psrun::nn {

using namespace dnnl;
using Tag = memory::format_tag;
using Dt = memory::data_type;

namespace {

void zero(const memory& m) { std::memset(m.get_data_handle(), 0, m.get_desc().get_size()); }

rnn_direction direction_of(const RnnSpec& s) {
    if (s.direction == "reverse") return rnn_direction::unidirectional_right2left;
    if (s.direction == "bidirectional") return rnn_direction::bidirectional_concat;
    return rnn_direction::unidirectional_left2right;
}

// The descs of one primitive's arguments (forward, or backward's diff_* as well).
struct RnnDescs {
    memory::desc src_layer, src_iter, src_iter_c, weights_layer, weights_iter, bias, dst_layer, dst_iter, dst_iter_c;
};

// The forward primitive_desc of the node's cell (backward needs it typed, as its hint).
struct ForwardPd {
    RnnCell cell = RnnCell::kLstm;
    lstm_forward::primitive_desc lstm;
    gru_forward::primitive_desc gru;
    lbr_gru_forward::primitive_desc lbr_gru;
    vanilla_rnn_forward::primitive_desc vanilla;
    const primitive_desc& get() const {
        switch (cell) {
            case RnnCell::kLstm: return lstm;
            case RnnCell::kGru: return gru;
            case RnnCell::kLbrGru: return lbr_gru;
            case RnnCell::kTanh:
            case RnnCell::kRelu: break;
        }
        return vanilla;
    }
};

algorithm activation_of(RnnCell cell) {
    return cell == RnnCell::kRelu ? algorithm::eltwise_relu : algorithm::eltwise_tanh;
}

ForwardPd forward_pd(RnnCell cell, prop_kind prop, rnn_direction dir, const RnnDescs& d, const engine& e) {
    ForwardPd pd;
    pd.cell = cell;
    switch (cell) {
        case RnnCell::kLstm:
            pd.lstm = lstm_forward::primitive_desc(
                lstm_forward::desc(prop, dir, d.src_layer, d.src_iter, d.src_iter_c, d.weights_layer, d.weights_iter,
                                   d.bias, d.dst_layer, d.dst_iter, d.dst_iter_c),
                e);
            break;
        case RnnCell::kGru:
            pd.gru = gru_forward::primitive_desc(gru_forward::desc(prop, dir, d.src_layer, d.src_iter, d.weights_layer,
                                                                   d.weights_iter, d.bias, d.dst_layer, d.dst_iter),
                                                 e);
            break;
        case RnnCell::kLbrGru:
            pd.lbr_gru = lbr_gru_forward::primitive_desc(
                lbr_gru_forward::desc(prop, dir, d.src_layer, d.src_iter, d.weights_layer, d.weights_iter, d.bias,
                                      d.dst_layer, d.dst_iter),
                e);
            break;
        case RnnCell::kTanh:
        case RnnCell::kRelu:
            pd.vanilla = vanilla_rnn_forward::primitive_desc(
                vanilla_rnn_forward::desc(prop, activation_of(cell), dir, d.src_layer, d.src_iter, d.weights_layer,
                                          d.weights_iter, d.bias, d.dst_layer, d.dst_iter),
                e);
            break;
    }
    return pd;
}

primitive_desc backward_pd(rnn_direction dir, const RnnDescs& f, const RnnDescs& g, const engine& e,
                           const ForwardPd& hint) {
    const auto bwd = prop_kind::backward;
    switch (hint.cell) {
        case RnnCell::kLstm:
            return lstm_backward::primitive_desc(
                lstm_backward::desc(bwd, dir, f.src_layer, f.src_iter, f.src_iter_c, f.weights_layer, f.weights_iter,
                                    f.bias, f.dst_layer, f.dst_iter, f.dst_iter_c, g.src_layer, g.src_iter,
                                    g.src_iter_c, g.weights_layer, g.weights_iter, g.bias, g.dst_layer, g.dst_iter,
                                    g.dst_iter_c),
                e, hint.lstm);
        case RnnCell::kGru:
            return gru_backward::primitive_desc(
                gru_backward::desc(bwd, dir, f.src_layer, f.src_iter, f.weights_layer, f.weights_iter, f.bias,
                                   f.dst_layer, f.dst_iter, g.src_layer, g.src_iter, g.weights_layer, g.weights_iter,
                                   g.bias, g.dst_layer, g.dst_iter),
                e, hint.gru);
        case RnnCell::kLbrGru:
            return lbr_gru_backward::primitive_desc(
                lbr_gru_backward::desc(bwd, dir, f.src_layer, f.src_iter, f.weights_layer, f.weights_iter, f.bias,
                                       f.dst_layer, f.dst_iter, g.src_layer, g.src_iter, g.weights_layer,
                                       g.weights_iter, g.bias, g.dst_layer, g.dst_iter),
                e, hint.lbr_gru);
        case RnnCell::kTanh:
        case RnnCell::kRelu:
            return vanilla_rnn_backward::primitive_desc(
                vanilla_rnn_backward::desc(bwd, activation_of(hint.cell), dir, f.src_layer, f.src_iter, f.weights_layer,
                                           f.weights_iter, f.bias, f.dst_layer, f.dst_iter, g.src_layer, g.src_iter,
                                           g.weights_layer, g.weights_iter, g.bias, g.dst_layer, g.dst_iter),
                e, hint.vanilla);
    }
    throw std::logic_error("unknown rnn cell");
}

memory::desc arg_desc(const primitive_desc& pd, int arg) { return pd.query_md(query::exec_arg_md, arg); }

// The node's tensors as the kernel reads and writes them: per direction and part, the tensor
// memory (input i) and the offset of that part.
struct Part {
    memory mem;
    std::int64_t offset = 0;
};

class RnnKernel final : public Kernel {
  public:
    void build(KernelBuilder& b) override {
        // `m` seen with `desc`; m is kept alive with the kernel (output_diff of an output nobody
        // reads returns a memory that nothing else holds).
        auto view = [this](const memory& m, const memory::desc& desc) {
            held_.push_back(m);
            return memory(desc, m.get_engine(), m.get_data_handle());
        };
        const Node& node = b.node();
        const auto xd = b.input_dims(0);
        const RnnSpec s = rnn_spec(node, xd[2]);
        const bool lstm = s.cell == RnnCell::kLstm;
        const memory::dim T = s.batch_first ? xd[1] : xd[0], N = s.batch_first ? xd[0] : xd[1], I = xd[2], H = s.hidden;
        const memory::dim D = s.dirs, G = s.gates(), GB = s.cell == RnnCell::kLbrGru ? 4 : G;
        const std::size_t data = node.data_inputs;
        const bool states = data > 1;
        const auto& engine = b.context().engine;
        const Dt adt = b.context().activation_type();
        const bool training = b.context().training;
        const rnn_direction dir = direction_of(s);
        const Tag seq = s.batch_first ? Tag::ntc : Tag::tnc;

        RnnDescs f;
        f.src_layer = memory::desc({T, N, I}, adt, seq);
        // The initial states are always given: zeros without state inputs.
        f.src_iter = memory::desc({1, D, N, H}, adt, Tag::ldnc);
        f.src_iter_c = lstm ? memory::desc({1, D, N, H}, Dt::f32, Tag::ldnc) : memory::desc();
        f.weights_layer = memory::desc({1, D, I, G, H}, adt, Tag::any);
        f.weights_iter = memory::desc({1, D, H, G, H}, adt, Tag::any);
        f.bias = memory::desc({1, D, GB, H}, Dt::f32, Tag::ldgo);
        f.dst_layer = memory::desc({T, N, D * H}, adt, seq);
        f.dst_iter = memory::desc({1, D, N, H}, adt, Tag::ldnc);
        f.dst_iter_c = lstm ? memory::desc({1, D, N, H}, Dt::f32, Tag::ldnc) : memory::desc();
        const ForwardPd typed_pd =
            forward_pd(s.cell, training ? prop_kind::forward_training : prop_kind::forward_inference, dir, f, engine);
        const primitive_desc& fwd_pd = typed_pd.get();
        b.note("fwd", fwd_pd);

        // The tensors and where each part is.
        const auto slots = rnn_slots(s);
        std::vector<memory> tensors;
        for (std::size_t k = 0; k < slots.size(); ++k) tensors.push_back(b.input_plain(data + k, Dt::f32));
        std::vector<std::array<Part, 4>> parts(static_cast<std::size_t>(D));
        for (int d = 0; d < D; ++d)
            for (const auto p :
                 {RnnPart::kWeightsInput, RnnPart::kWeightsHidden, RnnPart::kBiasInput, RnnPart::kBiasHidden}) {
                if (!s.bias && (p == RnnPart::kBiasInput || p == RnnPart::kBiasHidden)) continue;
                const RnnLocation at = rnn_location(s, d, p);
                parts[static_cast<std::size_t>(d)][static_cast<std::size_t>(p)] = Part{tensors[at.slot], at.offset};
            }
        auto part = [parts](int d, RnnPart p) {
            return parts[static_cast<std::size_t>(d)][static_cast<std::size_t>(p)];
        };

        // Forward: gather the weights and bias into oneDNN's order, then reorder the weights.
        const memory wl_plain(memory::desc({1, D, I, G, H}, Dt::f32, Tag::ldgoi), engine);
        const memory wi_plain(memory::desc({1, D, H, G, H}, Dt::f32, Tag::ldgoi), engine);
        const memory bias(f.bias, engine);
        zero(bias);
        b.forward([=] {
            auto* wl = static_cast<float*>(wl_plain.get_data_handle());
            auto* wi = static_cast<float*>(wi_plain.get_data_handle());
            auto* bs = static_cast<float*>(bias.get_data_handle());
            for (int d = 0; d < D; ++d) {
                const Part wx = part(d, RnnPart::kWeightsInput), wh = part(d, RnnPart::kWeightsHidden);
                for (memory::dim k = 0; k < G; ++k) {
                    const auto g = s.order[static_cast<std::size_t>(k)];
                    std::memcpy(wl + (d * G + k) * H * I,
                                static_cast<const float*>(wx.mem.get_data_handle()) + wx.offset + g * H * I,
                                static_cast<std::size_t>(H * I) * sizeof(float));
                    std::memcpy(wi + (d * G + k) * H * H,
                                static_cast<const float*>(wh.mem.get_data_handle()) + wh.offset + g * H * H,
                                static_cast<std::size_t>(H * H) * sizeof(float));
                }
                if (!s.bias) continue;
                const Part bx = part(d, RnnPart::kBiasInput), bh = part(d, RnnPart::kBiasHidden);
                const float* bi = static_cast<const float*>(bx.mem.get_data_handle()) + bx.offset;
                const float* bhh = static_cast<const float*>(bh.mem.get_data_handle()) + bh.offset;
                for (memory::dim k = 0; k < G; ++k) {
                    const auto g = s.order[static_cast<std::size_t>(k)];
                    float* out = bs + (d * GB + k) * H;
                    const bool apart = s.cell == RnnCell::kLbrGru && k == 2;  // n's hidden bias is gate 3
                    for (memory::dim h = 0; h < H; ++h) out[h] = bi[g * H + h] + (apart ? 0.0f : bhh[g * H + h]);
                    if (apart)
                        for (memory::dim h = 0; h < H; ++h) bs[(d * GB + 3) * H + h] = bhh[g * H + h];
                }
            }
        });
        const memory wl = forward_convert(b, wl_plain, arg_desc(fwd_pd, DNNL_ARG_WEIGHTS_LAYER));
        const memory wi = forward_convert(b, wi_plain, arg_desc(fwd_pd, DNNL_ARG_WEIGHTS_ITER));

        // Data: x, the states, the outputs.
        const memory src = view(b.input_as(0, plain_desc(xd, adt)), f.src_layer);
        memory h0(f.src_iter, engine), c0 = lstm ? memory(f.src_iter_c, engine) : memory();
        if (states) {
            h0 = view(b.input_as(1, plain_desc(b.input_dims(1), adt)), f.src_iter);
            if (lstm) c0 = view(b.input_as(2, plain_desc(b.input_dims(2), Dt::f32)), f.src_iter_c);
        } else {
            zero(h0);
            if (lstm) zero(c0);
        }
        // Y: oneDNN's dst directly where its layout is ONNX's and the type fits, else a reorder.
        const bool y_direct = (D == 1 || s.batch_first) && b.output_type(0) == adt;
        const memory dst = y_direct ? view(b.make_output(0, plain_desc(b.output_dims(0), adt)), f.dst_layer)
                                    : memory(f.dst_layer, engine);
        // dst seen with Y's dims [L, D, N, H] (or [N, L, D, H]).
        const memory::desc dst_as_y = s.batch_first ? plain_desc(b.output_dims(0), adt)
                                                    : memory::desc({T, D, N, H}, adt, {N * D * H, H, D * H, 1});
        memory y, y_from;
        if (!y_direct) {
            y = b.make_output(0, plain_desc(b.output_dims(0), b.output_type(0)));
            y_from = view(dst, dst_as_y);
        }
        const bool h_direct = b.output_type(1) == adt;
        const memory hn = h_direct ? view(b.make_output(1, plain_desc(b.output_dims(1), adt)), f.dst_iter)
                                   : memory(f.dst_iter, engine);
        const memory cn = lstm ? view(b.make_output(2, plain_desc(b.output_dims(2), Dt::f32)), f.dst_iter_c) : memory();
        const memory workspace = training ? memory(fwd_pd.workspace_desc(), engine) : memory();

        std::unordered_map<int, memory> args{{DNNL_ARG_SRC_LAYER, src},   {DNNL_ARG_WEIGHTS_LAYER, wl},
                                             {DNNL_ARG_WEIGHTS_ITER, wi}, {DNNL_ARG_BIAS, bias},
                                             {DNNL_ARG_DST_LAYER, dst},   {DNNL_ARG_DST_ITER, hn}};
        args.emplace(DNNL_ARG_SRC_ITER, h0);
        if (lstm) args.emplace(DNNL_ARG_SRC_ITER_C, c0);
        if (lstm) args.emplace(DNNL_ARG_DST_ITER_C, cn);
        if (training) args.emplace(DNNL_ARG_WORKSPACE, workspace);
        b.forward(primitive(fwd_pd), args);
        if (!y_direct) b.forward(reorder(y_from, y), {{DNNL_ARG_FROM, y_from}, {DNNL_ARG_TO, y}});
        if (!h_direct) {
            const memory out = b.make_output(1, plain_desc(b.output_dims(1), b.output_type(1)));
            const memory from = view(hn, plain_desc(b.output_dims(1), adt));
            b.forward(reorder(from, out), {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, out}});
        }
        if (!b.needs_backward()) return;

        // Backward. Diffs of data are in the activation type where oneDNN takes it, else f32.
        RnnDescs g;
        primitive_desc bwd_pd;
        for (const Dt ddt : {adt, Dt::f32}) {
            g.src_layer = memory::desc({T, N, I}, ddt, seq);
            g.src_iter = memory::desc({1, D, N, H}, ddt, Tag::ldnc);
            g.src_iter_c = lstm ? memory::desc({1, D, N, H}, Dt::f32, Tag::ldnc) : memory::desc();
            g.weights_layer = memory::desc({1, D, I, G, H}, Dt::f32, Tag::any);
            g.weights_iter = memory::desc({1, D, H, G, H}, Dt::f32, Tag::any);
            g.bias = memory::desc({1, D, GB, H}, Dt::f32, Tag::ldgo);
            g.dst_layer = memory::desc({T, N, D * H}, ddt, seq);
            g.dst_iter = memory::desc({1, D, N, H}, ddt, Tag::ldnc);
            g.dst_iter_c = lstm ? memory::desc({1, D, N, H}, Dt::f32, Tag::ldnc) : memory::desc();
            RnnDescs fb = f;
            fb.weights_layer = memory::desc({1, D, I, G, H}, adt, Tag::any);
            fb.weights_iter = memory::desc({1, D, H, G, H}, adt, Tag::any);
            try {
                bwd_pd = backward_pd(dir, fb, g, engine, typed_pd);
                break;
            } catch (const dnnl::error&) {
                if (ddt == Dt::f32) throw;
            }
        }
        b.note("bwd", bwd_pd);
        const Dt ddt = g.dst_layer.data_type();
        const memory bwl = backward_convert(b, wl_plain, arg_desc(bwd_pd, DNNL_ARG_WEIGHTS_LAYER));
        const memory bwi = backward_convert(b, wi_plain, arg_desc(bwd_pd, DNNL_ARG_WEIGHTS_ITER));

        // The output gradients in oneDNN's layouts.
        memory ddst;
        if (y_direct && ddt == adt) {
            ddst = view(b.output_diff(0, plain_desc(b.output_dims(0), adt)), g.dst_layer);
        } else {
            ddst = memory(g.dst_layer, engine);
            const memory dy = b.output_diff(0, plain_desc(b.output_dims(0), Dt::f32));
            const memory to = view(ddst, s.batch_first ? plain_desc(b.output_dims(0), ddt)
                                                       : memory::desc({T, D, N, H}, ddt, {N * D * H, H, D * H, 1}));
            b.backward(reorder(dy, to), {{DNNL_ARG_FROM, dy}, {DNNL_ARG_TO, to}});
        }
        const memory dhn = view(b.output_diff(1, plain_desc(b.output_dims(1), ddt)), g.dst_iter);
        const memory dcn =
            lstm ? view(b.output_diff(2, plain_desc(b.output_dims(2), Dt::f32)), g.dst_iter_c) : memory();

        // The input gradients (scratch where none is needed).
        auto grad = [&](std::size_t i, const memory::desc& oned, const memory::desc& plain) {
            return b.needs_input_grad(i) ? view(b.input_diff(i, plain), oned) : memory(oned, engine);
        };
        const memory dsrc = grad(0, g.src_layer, plain_desc(xd, ddt));
        memory dh0(g.src_iter, engine), dc0 = lstm ? memory(g.src_iter_c, engine) : memory();  // scratch without states
        if (states) {
            dh0 = grad(1, g.src_iter, plain_desc(b.input_dims(1), ddt));
            if (lstm) dc0 = grad(2, g.src_iter_c, plain_desc(b.input_dims(2), Dt::f32));
        }
        const memory dwl(arg_desc(bwd_pd, DNNL_ARG_DIFF_WEIGHTS_LAYER), engine);
        const memory dwi(arg_desc(bwd_pd, DNNL_ARG_DIFF_WEIGHTS_ITER), engine);
        const memory dbias(g.bias, engine);
        b.backward([dwl, dwi, dbias] {
            zero(dwl);
            zero(dwi);
            zero(dbias);
        });
        std::unordered_map<int, memory> bargs{
            {DNNL_ARG_SRC_LAYER, src},       {DNNL_ARG_WEIGHTS_LAYER, bwl},      {DNNL_ARG_WEIGHTS_ITER, bwi},
            {DNNL_ARG_BIAS, bias},           {DNNL_ARG_DST_LAYER, dst},          {DNNL_ARG_DST_ITER, hn},
            {DNNL_ARG_DIFF_DST_LAYER, ddst}, {DNNL_ARG_DIFF_DST_ITER, dhn},      {DNNL_ARG_WORKSPACE, workspace},
            {DNNL_ARG_DIFF_SRC_LAYER, dsrc}, {DNNL_ARG_DIFF_WEIGHTS_LAYER, dwl}, {DNNL_ARG_DIFF_WEIGHTS_ITER, dwi},
            {DNNL_ARG_DIFF_BIAS, dbias}};
        bargs.emplace(DNNL_ARG_SRC_ITER, h0);
        bargs.emplace(DNNL_ARG_DIFF_SRC_ITER, dh0);
        if (lstm) {
            bargs.emplace(DNNL_ARG_DST_ITER_C, cn);
            bargs.emplace(DNNL_ARG_DIFF_DST_ITER_C, dcn);
            bargs.emplace(DNNL_ARG_SRC_ITER_C, c0);
            bargs.emplace(DNNL_ARG_DIFF_SRC_ITER_C, dc0);
        }
        b.backward(primitive(bwd_pd), bargs);

        // The weight gradients back into the tensors' layouts.
        const memory dwl_plain(wl_plain.get_desc(), engine), dwi_plain(wi_plain.get_desc(), engine);
        b.backward(reorder(dwl, dwl_plain), {{DNNL_ARG_FROM, dwl}, {DNNL_ARG_TO, dwl_plain}});
        b.backward(reorder(dwi, dwi_plain), {{DNNL_ARG_FROM, dwi}, {DNNL_ARG_TO, dwi_plain}});
        std::vector<memory> dtensors(slots.size());
        for (std::size_t k = 0; k < slots.size(); ++k)
            if (b.needs_input_grad(data + k))
                dtensors[k] = b.input_diff(data + k, plain_desc(b.input_dims(data + k), Dt::f32));
        b.backward([=] {
            auto target = [&](int d, RnnPart p) -> float* {
                const RnnLocation at = rnn_location(s, d, p);
                const memory& m = dtensors[at.slot];
                return m ? static_cast<float*>(m.get_data_handle()) + at.offset : nullptr;
            };
            const auto* gwl = static_cast<const float*>(dwl_plain.get_data_handle());
            const auto* gwi = static_cast<const float*>(dwi_plain.get_data_handle());
            const auto* gb = static_cast<const float*>(dbias.get_data_handle());
            for (int d = 0; d < D; ++d) {
                float* wx = target(d, RnnPart::kWeightsInput);
                float* wh = target(d, RnnPart::kWeightsHidden);
                float* bx = s.bias ? target(d, RnnPart::kBiasInput) : nullptr;
                float* bh = s.bias ? target(d, RnnPart::kBiasHidden) : nullptr;
                for (memory::dim k = 0; k < G; ++k) {
                    const auto gate = s.order[static_cast<std::size_t>(k)];
                    if (wx)
                        std::memcpy(wx + gate * H * I, gwl + (d * G + k) * H * I,
                                    static_cast<std::size_t>(H * I) * sizeof(float));
                    if (wh)
                        std::memcpy(wh + gate * H * H, gwi + (d * G + k) * H * H,
                                    static_cast<std::size_t>(H * H) * sizeof(float));
                    const float* from = gb + (d * GB + k) * H;
                    const float* hidden = s.cell == RnnCell::kLbrGru && k == 2 ? gb + (d * GB + 3) * H : from;
                    if (bx) std::memcpy(bx + gate * H, from, static_cast<std::size_t>(H) * sizeof(float));
                    if (bh) std::memcpy(bh + gate * H, hidden, static_cast<std::size_t>(H) * sizeof(float));
                }
            }
        });
    }

  private:
    std::vector<memory> held_;
};

}  // namespace

std::unique_ptr<Kernel> make_rnn_kernel() { return std::make_unique<RnnKernel>(); }

}  // namespace psrun::nn
