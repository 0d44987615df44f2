// The maximum, minimum and where kernels: hand loops in f32 on plain layouts with numpy
// broadcasting (broadcast_loop.h), forward and backward (build_broadcast_backward); integer values forward only, in
// s32.
#include <cstdint>
#include <memory>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/broadcast_loop.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

enum class SelectMode { kMax, kMin, kWhere };

// The share of dL/dy going to input k (0 or 1 for maximum/minimum; 1 or 2 for where) at an
// output element whose inputs hold `v` (v[2] unread for maximum/minimum): 1, 0, or 1/2 on ties
// of maximum/minimum.
float share(SelectMode mode, std::size_t k, const float* v) {
    if (mode == SelectMode::kWhere) return (k == 1) == (v[0] != 0.0f) ? 1.0f : 0.0f;
    if (v[0] == v[1]) return 0.5f;
    const bool a_wins = mode == SelectMode::kMax ? v[0] > v[1] : v[0] < v[1];
    return (k == 0) == a_wins ? 1.0f : 0.0f;
}

class SelectKernel final : public Kernel {
  public:
    std::string label_suffix() const override { return " [hand]"; }

    // maximum/minimum's backward compares the inputs; where's reads only the condition (input 0).
    // Neither reads the output. where's output may be written over x or y: each element is read
    // before it is written (an embedding masked by its padding: one buffer, as for masked_fill_).
    BackwardReads backward_reads(const std::vector<const Node*>& nodes, const EngineContext&) const override {
        const bool where = nodes.front()->op == "where";
        BackwardReads reads{where ? 0b1u : BackwardReads::kAllInputs, false};
        reads.as_converted = BackwardReads::kAllInputs;  // as input_plain() gave them
        if (where) reads.in_place = 1, reads.in_place_else = 2;
        reads.grad_over_output = where ? 0b110u : 0b11u;  // dX = dY * share, element by element
        return reads;
    }

    void build(KernelBuilder& b) override {
        const std::string& op = b.node().op;
        const SelectMode mode = op == "maximum"   ? SelectMode::kMax
                                : op == "minimum" ? SelectMode::kMin
                                                  : SelectMode::kWhere;
        if (b.output_type(0) == Dt::s32) {
            build_integers(b, mode);
            return;
        }
        const auto& engine = b.context().engine;
        const std::size_t count = b.input_count();
        std::vector<MemDims> dims;
        std::vector<memory> ins;
        for (std::size_t i = 0; i < count; ++i) {
            dims.push_back(b.input_dims(i));
            ins.push_back(b.input_plain(i, Dt::f32));
        }
        const auto ix = std::make_shared<const BroadcastIndex>(b.output_dims(0), dims);
        const memory::desc f32 = plain_desc(b.output_dims(0), Dt::f32);
        const Dt out_type = b.output_type(0);
        const memory y = out_type == Dt::f32 ? b.make_output(0, f32) : memory(f32, engine);
        b.forward([ins, y, ix, mode] {
            const float* in[3] = {};
            for (std::size_t i = 0; i < ins.size(); ++i) in[i] = static_cast<const float*>(ins[i].get_data_handle());
            float* out = static_cast<float*>(y.get_data_handle());
            for_each_element(*ix, in, ins.size(), [&](std::int64_t e, const float* v) {
                if (mode == SelectMode::kWhere) out[e] = v[0] != 0.0f ? v[1] : v[2];
                else if (mode == SelectMode::kMax) out[e] = v[0] >= v[1] ? v[0] : v[1];
                else out[e] = v[0] <= v[1] ? v[0] : v[1];
            });
        });
        if (out_type != Dt::f32) b.forward(run_reorder(b, y, b.make_output(0, plain_desc(b.output_dims(0), out_type))));
        b.note("fwd: hand " + op + " (f32)");
        if (!b.needs_backward()) return;
        if (mode == SelectMode::kWhere && b.needs_input_grad(0))  // the condition's gradient is 0
            b.backward(run_zero(b.input_diff(0, plain_desc(dims[0], Dt::f32))));
        // where's share depends on the condition alone: only it is read (backward_reads).
        build_broadcast_backward(b, ix, ins, mode == SelectMode::kWhere ? 1 : 0, mode == SelectMode::kWhere ? 1 : count,
                                 [mode](std::size_t k, const float* v) { return share(mode, k, v); });
    }

  private:
    // Integer a and b (x and y): selected in s32, exactly; no gradient (integers have none).
    static void build_integers(KernelBuilder& b, SelectMode mode) {
        const std::size_t count = b.input_count();
        std::vector<MemDims> dims;
        std::vector<memory> ins;
        for (std::size_t i = 0; i < count; ++i) {
            dims.push_back(b.input_dims(i));
            ins.push_back(b.input_plain(i, i == 0 && mode == SelectMode::kWhere ? Dt::f32 : Dt::s32));
        }
        const auto ix = std::make_shared<const BroadcastIndex>(b.output_dims(0), dims);
        const memory y = b.make_output(0, plain_desc(b.output_dims(0), Dt::s32));
        b.forward([ins, y, ix, mode] {
            auto* out = static_cast<std::int32_t*>(y.get_data_handle());
            const std::int64_t n = ix->size();
            if (mode == SelectMode::kWhere) {
                const auto* c = static_cast<const float*>(ins[0].get_data_handle());
                const auto* p = static_cast<const std::int32_t*>(ins[1].get_data_handle());
                const auto* q = static_cast<const std::int32_t*>(ins[2].get_data_handle());
#pragma omp parallel for schedule(static)
                for (std::int64_t e = 0; e < n; ++e)
                    out[e] = c[ix->at(0, e)] != 0.0f ? p[ix->at(1, e)] : q[ix->at(2, e)];
                return;
            }
            const auto* p = static_cast<const std::int32_t*>(ins[0].get_data_handle());
            const auto* q = static_cast<const std::int32_t*>(ins[1].get_data_handle());
            const bool larger = mode == SelectMode::kMax;
#pragma omp parallel for schedule(static)
            for (std::int64_t e = 0; e < n; ++e) {
                const std::int32_t u = p[ix->at(0, e)], v = q[ix->at(1, e)];
                out[e] = (u >= v) == larger ? u : v;
            }
        });
        b.note("fwd: hand integer " + b.node().op);
    }
};

}  // namespace

std::unique_ptr<Kernel> make_select_kernel() { return std::make_unique<SelectKernel>(); }

}  // namespace psrun::nn
