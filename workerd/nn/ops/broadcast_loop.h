// Numpy broadcasting for the hand loops of the element-wise kernels (select_kernel.cpp,
// mask_kernel.cpp, power_kernel.cpp): the flat index in each input of an output element, and
// the backward that routes dY times a per-element factor to each input's gradient.
#pragma once

#include <algorithm>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "workerd/nn/ops/kernel_views.h"

namespace psrun::nn {

// The output dims and, per input, the strides by which an output coordinate moves in it (0
// along the axes it broadcasts on). Inputs of lower rank are padded with leading 1s.
class BroadcastIndex {
  public:
    BroadcastIndex(MemDims out, const std::vector<MemDims>& inputs) : out_(std::move(out)) {
        for (const auto& in : inputs) {
            const MemDims p = padded(in, out_.size());
            MemDims s = plain_strides(p);
            for (std::size_t d = 0; d < p.size(); ++d)
                if (p[d] == 1) s[d] = 0;
            strides_.push_back(std::move(s));
            same_.push_back(p == out_);
        }
    }
    std::int64_t size() const { return element_count(out_); }
    // The flat index in input k of output element e.
    std::int64_t at(std::size_t k, std::int64_t e) const {
        if (same_[k]) return e;
        std::int64_t idx = 0;
        for (std::size_t d = out_.size(); d-- > 0;) {
            idx += (e % out_[d]) * strides_[k][d];
            e /= out_[d];
        }
        return idx;
    }
    const MemDims& out() const { return out_; }
    // The output as rows of its last dimension: inner() elements each, size() / inner() rows.
    // Within a row, input k's index moves by inner_stride(k) (0 or 1) from at(k, row * inner()),
    // so a loop over rows computes each input's index once per row, not once per element.
    std::int64_t inner() const { return out_.empty() ? 1 : out_.back(); }
    std::int64_t inner_stride(std::size_t k) const { return strides_[k].empty() ? 0 : strides_[k].back(); }

  private:
    MemDims out_;
    std::vector<MemDims> strides_;
    std::vector<bool> same_;
};

// Calls f(e, v) for every output element e with v[k] its input k's value, row by row of the
// output's last dimension (BroadcastIndex::inner()), rows split across the OpenMP team.
// Up to 3 inputs.
template <class F>
void for_each_element(const BroadcastIndex& ix, const float* const* in, std::size_t inputs, F f) {
    const std::int64_t inner = ix.inner(), rows = inner > 0 ? ix.size() / inner : 0;
    std::int64_t step[3] = {};
    for (std::size_t k = 0; k < inputs; ++k) step[k] = ix.inner_stride(k);
#pragma omp parallel for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r) {
        const float* at[3] = {};
        for (std::size_t k = 0; k < inputs; ++k) at[k] = in[k] + ix.at(k, r * inner);
        float v[3] = {};
        for (std::int64_t i = 0; i < inner; ++i) {
            for (std::size_t k = 0; k < inputs; ++k) v[k] = at[k][i * step[k]];
            f(r * inner + i, v);
        }
    }
}

// Builds the backward of a hand element-wise kernel with one output: for each input k >= `first`
// whose gradient is needed, dX_k = dY * factor(k, v) at every output element, v holding the
// values of inputs 0 .. read-1 (`ins`, f32 plain, as input_plain() gave them). An input that
// broadcasts gets the full-size product in backward scratch, summed over the axes it broadcasts
// along (sum_to); one that does not gets it straight into its gradient, and a gradient written
// over dY (BackwardReads::grad_over_output) is computed last. factor is copied into the ops.
template <class Factor>
void build_broadcast_backward(KernelBuilder& b, const std::shared_ptr<const BroadcastIndex>& ix,
                              const std::vector<dnnl::memory>& ins, std::size_t first, std::size_t read,
                              Factor factor) {
    constexpr auto kF32 = dnnl::memory::data_type::f32;
    const dnnl::memory::desc f32 = plain_desc(ix->out(), kF32);
    const dnnl::memory dy = b.output_diff(0, f32);
    struct Target {
        std::size_t k;
        bool broadcasts;
        dnnl::memory full;
    };
    std::vector<Target> targets;
    for (std::size_t k = first; k < b.input_count(); ++k) {
        if (!b.needs_input_grad(k)) continue;
        const bool broadcasts = padded(b.input_dims(k), ix->out().size()) != ix->out();
        targets.push_back(
            {k, broadcasts, broadcasts ? b.scratch(f32, true) : b.input_diff(k, plain_desc(b.input_dims(k), kF32))});
    }
    std::stable_partition(targets.begin(), targets.end(),
                          [&](const Target& t) { return t.full.get_data_handle() != dy.get_data_handle(); });
    for (const auto& [k, broadcasts, full] : targets) {
        b.backward([ins, dy, full, ix, k, read, factor] {
            const float* in[3] = {};
            for (std::size_t i = 0; i < read; ++i) in[i] = static_cast<const float*>(ins[i].get_data_handle());
            const float* diff = static_cast<const float*>(dy.get_data_handle());
            float* out = static_cast<float*>(full.get_data_handle());
            for_each_element(*ix, in, read, [&](std::int64_t e, const float* v) { out[e] = diff[e] * factor(k, v); });
        });
        if (broadcasts) {
            const MemDims& dims = b.input_dims(k);
            b.backward(sum_to(b, full, b.input_diff(k, plain_desc(dims, kF32)), padded(dims, ix->out().size())));
        }
    }
}

}  // namespace psrun::nn
