// reduce_max and reduce_min: hand loops in f32 over each output element's reduced elements
// (offsets precomputed at build), forward and backward (dX = dY / ties at the elements equal to
// the result, 0 elsewhere). The forward keeps which elements those are, a bit each in scratch,
// so the backward reads neither the input nor the result (as PyTorch's max keeps indices).
// reduce_prod: the same hand loops; the backward reads the input (kept, in f32) and gives each
// element the product of the others, by a prefix and a suffix product (no division: exact where
// elements are zero, as torch.prod's gradient).
// reduce_mean and reduce_sum. Where the reduced axes are consecutive (the input seen as
// [outer, reduced, inner]: a mean over a sequence, a bag of embeddings, a global pool) a hand
// loop in f32 (oneDNN 2.6 runs its reference reduction there, ~100x slower); otherwise oneDNN's
// reduction primitive (plain layouts, the activation type; the output's data read with the
// reduced dims kept as 1s). Backward (oneDNN has none):
// dX is dY broadcast back over the reduced axes (a reorder from a zero-stride view), scaled
// by 1 / count for the mean, in f32.
#include <algorithm>
#include <bit>
#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

class ReduceKernel final : public Kernel {
  public:
    // reduce_max/min's backward reads its forward's bits (scratch); reduce_mean/sum's broadcasts
    // dY back: neither reads a value. reduce_prod's reads its input (as converted to f32).
    BackwardReads backward_reads(const std::vector<const Node*>& nodes, const EngineContext&) const override {
        if (nodes.front()->op != "reduce_prod") return BackwardReads::nothing();
        BackwardReads reads{0b1, false, -1};
        reads.as_converted = 0b1;
        return reads;
    }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const auto adt = b.context().activation_type();
        const bool mean = b.node().op == "reduce_mean";
        const MemDims in = b.input_dims(0);
        if (b.node().op == "reduce_max" || b.node().op == "reduce_min") {
            build_extreme(b, in, b.node().op == "reduce_max");
            return;
        }
        if (b.node().op == "reduce_prod") {
            build_prod(b, in);
            return;
        }
        MemDims kept = in;
        std::int64_t count = 1;
        for (auto a : b.node().attrs.at("axes").get<std::vector<std::int64_t>>()) {
            const auto d = static_cast<std::size_t>(a < 0 ? a + static_cast<std::int64_t>(in.size()) : a);
            count *= in[d];
            kept[d] = 1;
        }
        if (build_consecutive(b, in, kept, mean ? 1.0f / static_cast<float>(count) : 1.0f)) {
            build_backward(b, in, kept, mean, count);
            return;
        }
        const memory src = b.input_plain(0, adt);
        const memory dst = b.make_output(0, plain_desc(b.output_dims(0), adt));
        const View out = view_of(dst, plain_desc(kept, adt), engine);
        if (kept == in) {  // every reduced axis has one element (oneDNN refuses src == dst): a copy
            b.forward(run_reorder(b, src, out.view, {out}));
            b.note("fwd: reorder (the reduced axes have one element each)");
            build_backward(b, in, kept, mean, count);
            return;
        }
        reduction::primitive_desc pd(reduction::desc(mean ? algorithm::reduction_mean : algorithm::reduction_sum,
                                                     src.get_desc(), out.view.get_desc(), 0.f, 0.f),
                                     engine);
        b.note("fwd", pd);
        b.forward(run_primitive(b, reduction(pd), {{DNNL_ARG_SRC, src}, {DNNL_ARG_DST, out.view}}, {out}));
        build_backward(b, in, kept, mean, count);
    }

  private:
    // first[o]: the offset of output element o's first input element; second[r]: the offset of
    // reduced element r from it (plain layouts).
    using Offsets = std::pair<std::vector<std::int64_t>, std::vector<std::int64_t>>;
    static std::shared_ptr<const Offsets> reduced_offsets(KernelBuilder& b, const MemDims& in) {
        std::vector<bool> reduced(in.size(), false);
        for (auto a : b.node().attrs.at("axes").get<std::vector<std::int64_t>>())
            reduced[static_cast<std::size_t>(a < 0 ? a + static_cast<std::int64_t>(in.size()) : a)] = true;
        const MemDims strides = plain_strides(in);
        std::vector<std::int64_t> base{0}, step{0};
        for (std::size_t d = 0; d < in.size(); ++d) {
            std::vector<std::int64_t>& v = reduced[d] ? step : base;
            std::vector<std::int64_t> next;
            next.reserve(v.size() * static_cast<std::size_t>(in[d]));
            for (const auto o : v)
                for (std::int64_t k = 0; k < in[d]; ++k) next.push_back(o + k * strides[d]);
            v = std::move(next);
        }
        return std::make_shared<const Offsets>(std::move(base), std::move(step));
    }

    static void build_extreme(KernelBuilder& b, const MemDims& in, bool max) {
        const auto& engine = b.context().engine;
        const auto offsets = reduced_offsets(b, in);
        const memory x = b.input_plain(0, Dt::f32);
        const Dt out_type = b.output_type(0);
        const memory::desc f32 = plain_desc(b.output_dims(0), Dt::f32);
        const memory y = out_type == Dt::f32 ? b.make_output(0, f32) : memory(f32, engine);
        // Bit r of output o's words: reduced element r equals the result (the backward's ties).
        const bool grad = b.needs_input_grad(0);
        const auto outs = static_cast<std::int64_t>(offsets->first.size());
        const auto words = static_cast<std::int64_t>((offsets->second.size() + 63) / 64);
        const memory ties = grad ? b.scratch(plain_desc({outs * words * 8}, Dt::u8), false) : memory();
        b.forward([x, y, ties, offsets, max, outs, words] {
            const float* src = static_cast<const float*>(x.get_data_handle());
            float* dst = static_cast<float*>(y.get_data_handle());
            auto* bits = ties ? static_cast<std::uint64_t*>(ties.get_data_handle()) : nullptr;
            const auto& bases = offsets->first;
            const auto& steps = offsets->second;
#pragma omp parallel for schedule(static)
            for (std::int64_t o = 0; o < outs; ++o) {
                const float* row = src + bases[static_cast<std::size_t>(o)];
                float best = row[steps[0]];
                for (const auto s : steps) best = max ? std::max(best, row[s]) : std::min(best, row[s]);
                dst[o] = best;
                if (bits == nullptr) continue;
                std::uint64_t* mine = bits + o * words;
                std::fill(mine, mine + words, std::uint64_t{0});
                for (std::size_t r = 0; r < steps.size(); ++r)
                    if (row[steps[r]] == best) mine[r / 64] |= std::uint64_t{1} << (r % 64);
            }
        });
        if (out_type != Dt::f32) b.forward(run_reorder(b, y, b.make_output(0, plain_desc(b.output_dims(0), out_type))));
        b.note(std::string("fwd: hand reduce_") + (max ? "max" : "min") + " (f32)");
        if (!grad) return;
        const memory dy = b.output_diff(0, f32);
        const memory dx = b.input_diff(0, plain_desc(in, Dt::f32));
        b.backward([ties, dy, dx, offsets, outs, words] {
            const auto* bits = static_cast<const std::uint64_t*>(ties.get_data_handle());
            const float* diff = static_cast<const float*>(dy.get_data_handle());
            float* out = static_cast<float*>(dx.get_data_handle());
            const auto& bases = offsets->first;
            const auto& steps = offsets->second;
#pragma omp parallel for schedule(static)
            for (std::int64_t o = 0; o < outs; ++o) {
                const std::int64_t first = bases[static_cast<std::size_t>(o)];
                const std::uint64_t* mine = bits + o * words;
                int count = 0;
                for (std::int64_t w = 0; w < words; ++w) count += std::popcount(mine[w]);
                const float g = count > 0 ? diff[o] / static_cast<float>(count) : 0.0f;
                for (std::size_t r = 0; r < steps.size(); ++r)
                    out[first + steps[r]] = (mine[r / 64] >> (r % 64)) & 1u ? g : 0.0f;
            }
        });
    }

    static void build_prod(KernelBuilder& b, const MemDims& in) {
        const auto& engine = b.context().engine;
        const auto offsets = reduced_offsets(b, in);
        const memory x = b.input_plain(0, Dt::f32);
        const Dt out_type = b.output_type(0);
        const memory::desc f32 = plain_desc(b.output_dims(0), Dt::f32);
        const memory y = out_type == Dt::f32 ? b.make_output(0, f32) : memory(f32, engine);
        const auto outs = static_cast<std::int64_t>(offsets->first.size());
        b.forward([x, y, offsets, outs] {
            const float* src = static_cast<const float*>(x.get_data_handle());
            float* dst = static_cast<float*>(y.get_data_handle());
#pragma omp parallel for schedule(static)
            for (std::int64_t o = 0; o < outs; ++o) {
                const float* row = src + offsets->first[static_cast<std::size_t>(o)];
                float p = 1.0f;
                for (const auto s : offsets->second) p *= row[s];
                dst[o] = p;
            }
        });
        if (out_type != Dt::f32) b.forward(run_reorder(b, y, b.make_output(0, plain_desc(b.output_dims(0), out_type))));
        b.note("fwd: hand reduce_prod (f32)");
        if (!b.needs_input_grad(0)) return;
        const memory dy = b.output_diff(0, f32);
        const memory dx = b.input_diff(0, plain_desc(in, Dt::f32));
        b.backward([x, dy, dx, offsets, outs] {
            const float* src = static_cast<const float*>(x.get_data_handle());
            const float* diff = static_cast<const float*>(dy.get_data_handle());
            float* out = static_cast<float*>(dx.get_data_handle());
            const auto& steps = offsets->second;
            const auto n = static_cast<std::int64_t>(steps.size());
#pragma omp parallel for schedule(static)
            for (std::int64_t o = 0; o < outs; ++o) {
                const std::int64_t first = offsets->first[static_cast<std::size_t>(o)];
                float before = 1.0f;  // the product of the elements before r
                for (std::int64_t r = 0; r < n; ++r) {
                    out[first + steps[static_cast<std::size_t>(r)]] = before;
                    before *= src[first + steps[static_cast<std::size_t>(r)]];
                }
                float after = diff[o];  // dY times the product of the elements after r
                for (std::int64_t r = n - 1; r >= 0; --r) {
                    const std::int64_t at = first + steps[static_cast<std::size_t>(r)];
                    out[at] *= after;
                    after *= src[at];
                }
            }
        });
    }

    // The hand forward where the reduced axes (kept[d] == 1 != in[d]) are consecutive; false
    // (nothing built) otherwise.
    static bool build_consecutive(KernelBuilder& b, const MemDims& in, const MemDims& kept, float scale) {
        std::size_t first = in.size(), last = 0;
        for (std::size_t d = 0; d < in.size(); ++d)
            if (kept[d] != in[d]) first = std::min(first, d), last = d;
        if (first == in.size()) return false;
        std::int64_t outer = 1, reduced = 1, inner = 1;
        for (std::size_t d = 0; d < in.size(); ++d) {
            if (d < first) outer *= in[d];
            else if (d > last) inner *= in[d];
            else if (kept[d] == in[d] && in[d] != 1) return false;  // a kept axis between reduced ones
            else reduced *= in[d];
        }
        const auto& engine = b.context().engine;
        const memory x = b.input_plain(0, Dt::f32);
        const Dt out_type = b.output_type(0);
        const memory::desc f32 = plain_desc(b.output_dims(0), Dt::f32);
        const memory y = out_type == Dt::f32 ? b.make_output(0, f32) : memory(f32, engine);
        b.forward([x, y, outer, reduced, inner, scale] {
            const float* src = static_cast<const float*>(x.get_data_handle());
            float* dst = static_cast<float*>(y.get_data_handle());
            // Blocks of up to 256 inner elements, so that a reduction with outer 1 (a mean over
            // a sequence's first axis) still spreads over the threads.
            const std::int64_t block = 256, blocks = (inner + block - 1) / block;
#pragma omp parallel for schedule(static)
            for (std::int64_t ob = 0; ob < outer * blocks; ++ob) {
                const std::int64_t o = ob / blocks, i0 = (ob % blocks) * block, i1 = std::min(inner, i0 + block);
                float* out = dst + o * inner;
                const float* row = src + o * reduced * inner;
                for (std::int64_t i = i0; i < i1; ++i) out[i] = 0.0f;
                for (std::int64_t r = 0; r < reduced; ++r)
                    for (std::int64_t i = i0; i < i1; ++i) out[i] += row[r * inner + i];
                for (std::int64_t i = i0; i < i1; ++i) out[i] *= scale;
            }
        });
        if (out_type != Dt::f32) b.forward(run_reorder(b, y, b.make_output(0, plain_desc(b.output_dims(0), out_type))));
        b.note("fwd: hand reduction over consecutive axes (f32)");
        return true;
    }

    static void build_backward(KernelBuilder& b, const MemDims& in, const MemDims& kept, bool mean,
                               std::int64_t count) {
        const auto& engine = b.context().engine;
        if (!b.needs_input_grad(0)) return;
        const memory dy = b.output_diff(0, plain_desc(b.output_dims(0), Dt::f32));
        const View spread = view_of(dy, broadcast_desc(kept, in, Dt::f32), engine);
        const View dx = view_of(b.input_diff(0, plain_desc(in, Dt::f32)), plain_desc(in, Dt::f32), engine);
        b.backward(run_reorder(b, spread.view, dx.view, {spread, dx}, mean ? 1.0f / static_cast<float>(count) : 1.0f));
    }
};

}  // namespace

std::unique_ptr<Kernel> make_reduce_kernel() { return std::make_unique<ReduceKernel>(); }

}  // namespace psrun::nn
