// The scatter_nd and gather_nd kernels: hand loops on plain layouts over the whole batch. Each
// index tuple (s32, the batch coordinate first) becomes one offset into the data (negative
// entries from the end; a tuple outside the value: -1, skipped), then whole slices of
// `slice` contiguous elements move. Data and updates are read in f32 and the output written
// in f32 (then converted to the output's type).
// scatter_nd forward: copy, then each slice replaced (or added) in tuple order, serially (the
// last duplicate wins); backward: dData = dOut with the replaced slices zeroed (add: dOut),
// dUpdates[i] = dOut at tuple i. gather_nd forward: out[i] = data at tuple i (zeros outside);
// backward: dData = 0 plus dOut[i] at each tuple, serially (duplicates sum).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

struct NdShape {
    std::vector<std::int64_t> dims;  // the data's k dims the tuples address
    std::vector<std::int64_t> strides;
    std::int64_t tuples = 0, slice = 1, total = 0;
    // batch_dims 1: tuple t belongs to example t / per_example, whose data starts at that times
    // example (elements).
    std::int64_t per_example = 0, example = 0;
};

NdShape nd_shape(const MemDims& data, const MemDims& indices, std::int64_t batch_dims) {
    NdShape s;
    const auto k = static_cast<std::size_t>(indices.back());
    const auto first = static_cast<std::size_t>(batch_dims);
    s.dims.assign(data.begin() + static_cast<std::ptrdiff_t>(first),
                  data.begin() + static_cast<std::ptrdiff_t>(first + k));
    for (std::size_t d = first + k; d < data.size(); ++d) s.slice *= data[d];
    s.strides.assign(k, 0);
    std::int64_t stride = s.slice;
    for (std::size_t d = k; d-- > 0;) {
        s.strides[d] = stride;
        stride *= s.dims[d];
    }
    s.example = stride;
    s.total = batch_dims == 1 ? stride * data[0] : stride;
    s.tuples = 1;
    for (std::size_t d = 0; d + 1 < indices.size(); ++d) s.tuples *= indices[d];
    if (batch_dims == 1) s.per_example = s.tuples / indices[0];
    return s;
}

// The element offset of tuple t, or -1 outside the value.
std::int64_t offset_of(const NdShape& s, const std::int32_t* indices, std::int64_t t) {
    const std::size_t k = s.dims.size();
    std::int64_t at = s.per_example > 0 ? t / s.per_example * s.example : 0;
    for (std::size_t d = 0; d < k; ++d) {
        std::int64_t i = indices[static_cast<std::size_t>(t) * k + d];
        if (i < 0) i += s.dims[d];
        if (i < 0 || i >= s.dims[d]) return -1;
        at += i * s.strides[d];
    }
    return at;
}

const std::int32_t* ints(const memory& m) { return static_cast<const std::int32_t*>(m.get_data_handle()); }
const float* floats(const memory& m) { return static_cast<const float*>(m.get_data_handle()); }
float* floats_out(const memory& m) { return static_cast<float*>(m.get_data_handle()); }

class NdKernel final : public Kernel {
  public:
    // Backward reads the indices only.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads{0b010, false, -1, -1};
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const bool scatter = b.node().op == "scatter_nd";
        const bool add = scatter && b.node().attrs.at("reduction") == "add";
        const MemDims data_dims = b.input_dims(0), out_dims = b.output_dims(0);
        const NdShape s =
            nd_shape(data_dims, b.input_dims(1), scatter ? 0 : b.node().attrs.at("batch_dims").get<std::int64_t>());
        const memory data = b.input_plain(0, Dt::f32);
        const memory idx = b.input_plain(1, Dt::s32);
        const memory upd = scatter ? b.input_plain(2, Dt::f32) : memory();
        const Dt out_type = b.output_type(0);
        const bool direct = out_type == Dt::f32;
        const memory y =
            direct ? b.make_output(0, plain_desc(out_dims, Dt::f32)) : memory(plain_desc(out_dims, Dt::f32), engine);
        const auto bytes = static_cast<std::size_t>(s.slice) * sizeof(float);
        if (scatter) {
            b.forward([data, idx, upd, y, s, add, bytes] {
                float* out = floats_out(y);
                std::memcpy(out, floats(data), static_cast<std::size_t>(s.total) * sizeof(float));
                for (std::int64_t t = 0; t < s.tuples; ++t) {
                    const std::int64_t at = offset_of(s, ints(idx), t);
                    if (at < 0) continue;
                    const float* from = floats(upd) + t * s.slice;
                    if (!add) std::memcpy(out + at, from, bytes);
                    else
                        for (std::int64_t e = 0; e < s.slice; ++e) out[at + e] += from[e];
                }
            });
        } else {
            b.forward([data, idx, y, s, bytes] {
                float* out = floats_out(y);
                for (std::int64_t t = 0; t < s.tuples; ++t) {
                    const std::int64_t at = offset_of(s, ints(idx), t);
                    if (at < 0) std::memset(out + t * s.slice, 0, bytes);
                    else std::memcpy(out + t * s.slice, floats(data) + at, bytes);
                }
            });
        }
        if (!direct) b.forward(run_reorder(b, y, b.make_output(0, plain_desc(out_dims, out_type))));
        b.note(scatter ? "fwd: hand scatter_nd" : "fwd: hand gather_nd");
        if (!b.needs_backward()) return;
        const memory dy = b.output_diff(0, plain_desc(out_dims, Dt::f32));
        if (!scatter) {
            if (!b.needs_input_grad(0)) return;
            const memory dx = b.input_diff(0, plain_desc(data_dims, Dt::f32));
            b.backward([dy, idx, dx, s] {
                float* d = floats_out(dx);
                std::memset(d, 0, static_cast<std::size_t>(s.total) * sizeof(float));
                for (std::int64_t t = 0; t < s.tuples; ++t) {
                    const std::int64_t at = offset_of(s, ints(idx), t);
                    if (at < 0) continue;
                    for (std::int64_t e = 0; e < s.slice; ++e) d[at + e] += floats(dy)[t * s.slice + e];
                }
            });
            return;
        }
        if (b.needs_input_grad(2)) {
            const memory du = b.input_diff(2, plain_desc(b.input_dims(2), Dt::f32));
            b.backward([dy, idx, du, s, bytes] {
                for (std::int64_t t = 0; t < s.tuples; ++t) {
                    const std::int64_t at = offset_of(s, ints(idx), t);
                    float* to = floats_out(du) + t * s.slice;
                    if (at < 0) std::memset(to, 0, bytes);
                    else std::memcpy(to, floats(dy) + at, bytes);
                }
            });
        }
        if (b.needs_input_grad(0)) {
            const memory dx = b.input_diff(0, plain_desc(data_dims, Dt::f32));
            b.backward([dy, idx, dx, s, add, bytes] {
                std::memcpy(floats_out(dx), floats(dy), static_cast<std::size_t>(s.total) * sizeof(float));
                if (add) return;
                for (std::int64_t t = 0; t < s.tuples; ++t)
                    if (const std::int64_t at = offset_of(s, ints(idx), t); at >= 0)
                        std::memset(floats_out(dx) + at, 0, bytes);
            });
        }
    }
};

}  // namespace

std::unique_ptr<Kernel> make_nd_kernel() { return std::make_unique<NdKernel>(); }

}  // namespace psrun::nn
