// An element-wise kernel by hand, for kinds oneDNN 2.6's eltwise has no algorithm for (the
// functions of hand_math.h, quantize_linear): y[i] = forward(i, x[i]) and dx[i] = dy[i] *
// slope(i, x[i]), in f32 on the plain layout (converted to the output's type where that is bf16;
// i is the element's row-major index, for a per-channel parameter). Backward reads the input, so
// the kernel's backward_reads() must say kAllInputs. Forward and Slope are callables
// float(std::int64_t, float), copied into the steps; called from OpenMP threads.
#pragma once

#include <cstdint>
#include <string>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"

namespace psrun::nn {

template <typename Forward, typename Slope>
void build_hand_eltwise(KernelBuilder& b, Forward forward, Slope slope) {
    using Type = dnnl::memory::data_type;
    const MemDims dims = b.input_dims(0);
    const dnnl::memory::desc f32 = plain_desc(dims, Type::f32);
    const dnnl::memory x = b.input_plain(0, Type::f32);
    const Type out_type = b.output_type(0);
    const dnnl::memory y = out_type == Type::f32 ? b.make_output(0, f32) : dnnl::memory(f32, b.context().engine);
    const auto n = element_count(dims);
    b.forward([x, y, n, forward] {
        const float* in = static_cast<const float*>(x.get_data_handle());
        float* out = static_cast<float*>(y.get_data_handle());
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) out[i] = forward(i, in[i]);
    });
    if (out_type != Type::f32) {
        const dnnl::memory dst = b.make_output(0, plain_desc(dims, out_type));
        b.forward(run_reorder(b, y, dst));
    }
    b.note("fwd: hand " + b.node().op + " (f32)");
    if (!b.needs_input_grad(0)) return;
    const dnnl::memory dy = b.output_diff(0, f32);
    const dnnl::memory dx = b.input_diff(0, f32);
    b.backward([x, dy, dx, n, slope] {
        const float* in = static_cast<const float*>(x.get_data_handle());
        const float* g = static_cast<const float*>(dy.get_data_handle());
        float* out = static_cast<float*>(dx.get_data_handle());
#pragma omp parallel for schedule(static)
        for (std::int64_t i = 0; i < n; ++i) out[i] = g[i] * slope(i, in[i]);
    });
}

}  // namespace psrun::nn
