// The top_k kernel: a hand loop on the plain layout, seen as [outer, len, inner] around the
// axis. Each row (one outer, one inner) is read in f32 (s32 for integer ids, exact) into a list
// of (value, index), and std::partial_sort puts the k first by the kind's order; values are
// written in f32 (then converted to the output's type) or s32, indices as s32. Backward: dX = 0, then dX[index] +=
// dValues row by row (the indices are distinct within a row: a plain store would do, the sum
// keeps it right if that ever changes).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <memory>
#include <type_traits>
#include <utility>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

struct TopKShape {
    std::int64_t outer = 1, len = 1, inner = 1, k = 1;
    bool largest = true;
};

// a before b in the output: by value (NaN the largest), ties by the lower index.
template <typename T>
bool precedes(const std::pair<T, std::int32_t>& a, const std::pair<T, std::int32_t>& b, bool largest) {
    if constexpr (std::is_floating_point_v<T>) {
        const bool na = std::isnan(a.first), nb = std::isnan(b.first);
        if (na || nb) {
            if (na && nb) return a.second < b.second;
            return largest ? na : nb;
        }
    }
    if (a.first != b.first) return largest ? a.first > b.first : a.first < b.first;
    return a.second < b.second;
}

template <typename T>
void select_rows(const T* x, T* values, std::int32_t* indices, const TopKShape& s) {
#pragma omp parallel
    {
        std::vector<std::pair<T, std::int32_t>> row(static_cast<std::size_t>(s.len));
#pragma omp for collapse(2) schedule(static)
        for (std::int64_t o = 0; o < s.outer; ++o)
            for (std::int64_t c = 0; c < s.inner; ++c) {
                const T* in = x + o * s.len * s.inner + c;
                for (std::int64_t j = 0; j < s.len; ++j)
                    row[static_cast<std::size_t>(j)] = {in[j * s.inner], static_cast<std::int32_t>(j)};
                std::partial_sort(
                    row.begin(), row.begin() + s.k, row.end(),
                    [largest = s.largest](const auto& a, const auto& b) { return precedes<T>(a, b, largest); });
                const std::int64_t base = o * s.k * s.inner + c;
                for (std::int64_t j = 0; j < s.k; ++j) {
                    values[base + j * s.inner] = row[static_cast<std::size_t>(j)].first;
                    indices[base + j * s.inner] = row[static_cast<std::size_t>(j)].second;
                }
            }
    }
}

void scatter_rows(const float* dv, const std::int32_t* indices, float* dx, const TopKShape& s) {
    std::memset(dx, 0, static_cast<std::size_t>(s.outer * s.len * s.inner) * sizeof(float));
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t o = 0; o < s.outer; ++o)
        for (std::int64_t c = 0; c < s.inner; ++c) {
            const std::int64_t base = o * s.k * s.inner + c;
            float* out = dx + o * s.len * s.inner + c;
            for (std::int64_t j = 0; j < s.k; ++j) out[indices[base + j * s.inner] * s.inner] += dv[base + j * s.inner];
        }
}

class TopKKernel final : public Kernel {
  public:
    // Backward reads its indices output, never the input.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads{0, true, -1, -1};
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const MemDims dims = b.input_dims(0);
        const MemDims out_dims = b.output_dims(0);
        const auto rank = static_cast<std::int64_t>(dims.size());
        std::int64_t axis = b.node().attrs.at("axis").get<std::int64_t>();
        if (axis < 0) axis += rank;
        TopKShape s;
        s.k = b.node().attrs.at("k").get<std::int64_t>();
        s.largest = b.node().attrs.at("largest").get<bool>();
        for (std::int64_t d = 0; d < rank; ++d) {
            const auto v = dims[static_cast<std::size_t>(d)];
            (d < axis ? s.outer : d == axis ? s.len : s.inner) *= v;
        }
        const Dt out_type = b.output_type(0);
        const memory indices = b.make_output(1, plain_desc(out_dims, Dt::s32));
        if (out_type == Dt::s32) {  // integer ids: no gradient
            const memory x = b.input_plain(0, Dt::s32);
            const memory values = b.make_output(0, plain_desc(out_dims, Dt::s32));
            b.forward([x, values, indices, s] {
                select_rows(static_cast<const std::int32_t*>(x.get_data_handle()),
                            static_cast<std::int32_t*>(values.get_data_handle()),
                            static_cast<std::int32_t*>(indices.get_data_handle()), s);
            });
            b.note("fwd: hand top_k (s32)");
            return;
        }
        const memory x = b.input_plain(0, Dt::f32);
        const bool direct = out_type == Dt::f32;
        const memory values =
            direct ? b.make_output(0, plain_desc(out_dims, Dt::f32)) : memory(plain_desc(out_dims, Dt::f32), engine);
        b.forward([x, values, indices, s] {
            select_rows(static_cast<const float*>(x.get_data_handle()), static_cast<float*>(values.get_data_handle()),
                        static_cast<std::int32_t*>(indices.get_data_handle()), s);
        });
        if (!direct) b.forward(run_reorder(b, values, b.make_output(0, plain_desc(out_dims, out_type))));
        b.note("fwd: hand top_k");
        if (!b.needs_input_grad(0)) return;
        const memory dv = b.output_diff(0, plain_desc(out_dims, Dt::f32));
        const memory dx = b.input_diff(0, plain_desc(dims, Dt::f32));
        b.backward([dv, indices, dx, s] {
            scatter_rows(static_cast<const float*>(dv.get_data_handle()),
                         static_cast<const std::int32_t*>(indices.get_data_handle()),
                         static_cast<float*>(dx.get_data_handle()), s);
        });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_top_k_kernel() { return std::make_unique<TopKKernel>(); }

}  // namespace psrun::nn
