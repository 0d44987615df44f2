// The cumsum kernel: a hand loop on the plain layout, seen as [outer, len, inner] around the
// axis. Integers (s32) sum in 64 bits and are stored back as s32; floats are read and summed in
// f32 (then converted to the output's type). Backward: dX is the running sum of dY in the other
// direction, with the same exclusivity (y_j sums x_i over i <= j, so dx_i sums dy_j over j >= i).
#include <cstdint>
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

struct Shape {
    std::int64_t outer = 1, len = 1, inner = 1;
    bool exclusive = false, reverse = false;
};

// out[o, j, k] = sum of in[o, i, k] over the i that j takes (see the file comment).
template <typename T, typename Acc>
void running_sum(const T* in, T* out, const Shape& s, bool reverse) {
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t o = 0; o < s.outer; ++o)
        for (std::int64_t k = 0; k < s.inner; ++k) {
            Acc acc = 0;
            for (std::int64_t step = 0; step < s.len; ++step) {
                const std::int64_t j = reverse ? s.len - 1 - step : step;
                const std::int64_t at = (o * s.len + j) * s.inner + k;
                const Acc x = static_cast<Acc>(in[at]);
                if (!s.exclusive) acc += x;
                out[at] = static_cast<T>(acc);
                if (s.exclusive) acc += x;
            }
        }
}

class CumsumKernel final : public Kernel {
  public:
    // Backward reads nothing of the forward's: dY alone.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const MemDims dims = b.input_dims(0);
        const auto rank = static_cast<std::int64_t>(dims.size());
        std::int64_t axis = b.node().attrs.at("axis").get<std::int64_t>();
        if (axis < 0) axis += rank;
        Shape s;
        s.exclusive = b.node().attrs.at("exclusive").get<bool>();
        s.reverse = b.node().attrs.at("reverse").get<bool>();
        for (std::int64_t d = 0; d < rank; ++d) {
            const auto v = dims[static_cast<std::size_t>(d)];
            (d < axis ? s.outer : d == axis ? s.len : s.inner) *= v;
        }
        const Dt out_type = b.output_type(0);
        if (out_type == Dt::s32) {
            const memory x = b.input_plain(0, Dt::s32);
            const memory y = b.make_output(0, plain_desc(dims, Dt::s32));
            b.forward([x, y, s] {
                running_sum<std::int32_t, std::int64_t>(static_cast<const std::int32_t*>(x.get_data_handle()),
                                                        static_cast<std::int32_t*>(y.get_data_handle()), s, s.reverse);
            });
            b.note("fwd: hand cumsum (s32)");
            return;
        }
        const memory x = b.input_plain(0, Dt::f32);
        const bool direct = out_type == Dt::f32;
        const memory y =
            direct ? b.make_output(0, plain_desc(dims, Dt::f32)) : memory(plain_desc(dims, Dt::f32), engine);
        b.forward([x, y, s] {
            running_sum<float, float>(static_cast<const float*>(x.get_data_handle()),
                                      static_cast<float*>(y.get_data_handle()), s, s.reverse);
        });
        if (!direct) b.forward(run_reorder(b, y, b.make_output(0, plain_desc(dims, out_type))));
        b.note("fwd: hand cumsum");
        if (!b.needs_input_grad(0)) return;
        const memory dy = b.output_diff(0, plain_desc(dims, Dt::f32));
        const memory dx = b.input_diff(0, plain_desc(dims, Dt::f32));
        b.backward([dy, dx, s] {
            running_sum<float, float>(static_cast<const float*>(dy.get_data_handle()),
                                      static_cast<float*>(dx.get_data_handle()), s, !s.reverse);
        });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_cumsum_kernel() { return std::make_unique<CumsumKernel>(); }

}  // namespace psrun::nn
