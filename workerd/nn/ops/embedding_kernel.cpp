// The embedding and gather kernels, hand-written (oneDNN 2.6 has no gather):
//   embedding: forward copies each id's table row into the output (f32, or rounded to bf16);
//     every id is checked first, and one outside [0, V) throws std::out_of_range naming the
//     example. Backward: the table's gradient is zeroed and the output gradient's rows added
//     at their ids (duplicates summed; none at padding_index). Each OpenMP thread owns a range of table rows and adds
//     the positions in order, so every row's sum runs in the same order whatever the thread
//     count: the result is deterministic, bit for bit. The kernel reads table rows only
//     through TableRows, so that rows can later come from elsewhere (a table kept on the
//     parameter servers).
//   gather: forward copies the selected slices (bytes, in the output's type); backward zeroes
//     the input's gradient and adds the output's slices back (repeated indices summed), in f32.
#include <omp.h>

#include <cstring>
#include <memory>
#include <stdexcept>
#include <string>

#include "common/wire_precision.h"
#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

std::int64_t elements(const memory::dims& dims) {
    std::int64_t n = 1;
    for (const auto d : dims) n *= d;
    return n;
}

// Where the embedding's rows are read from: today the table tensor in the parameter buffer.
class TableRows {
  public:
    TableRows(const float* base, std::int64_t dim) : base_(base), dim_(dim) {}
    // REQUIRES: 0 <= id < vocabulary (checked before).
    const float* row(std::int32_t id) const { return base_ + static_cast<std::int64_t>(id) * dim_; }

  private:
    const float* base_;
    std::int64_t dim_;
};

class EmbeddingKernel final : public Kernel {
  public:
    std::string label_suffix() const override { return " [hand]"; }

    // Backward reads the ids (input 0), not the table or the output.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads{0b1, false};
        reads.as_converted = 0b1;  // the ids as input_plain() gave them
        return reads;
    }

    void build(KernelBuilder& b) override {
        const auto vocabulary = b.node().attrs.at("vocabulary").get<std::int64_t>();
        const auto dim = b.node().attrs.at("dim").get<std::int64_t>();
        const std::int64_t padding = b.node().attrs.value("padding_index", std::int64_t{-1});
        const memory ids = b.input_plain(0, Dt::s32);
        const memory table = b.input_plain(1, Dt::f32);
        const Dt out_type = b.output_type(0);
        const memory out = b.make_output(0, plain_desc(b.output_dims(0), out_type));
        const std::int64_t positions = elements(b.input_dims(0));
        const std::int64_t per_example = positions / std::max<std::int64_t>(1, b.context().batch);
        b.note("embedding: hand gather, " + std::string(out_type == Dt::bf16 ? "bf16" : "f32") + " rows");
        b.forward([=] {
            const auto* id = static_cast<const std::int32_t*>(ids.get_data_handle());
            for (std::int64_t p = 0; p < positions; ++p)
                if (id[p] < 0 || id[p] >= vocabulary)
                    throw std::out_of_range("id " + std::to_string(id[p]) + " at position " +
                                            std::to_string(p % per_example) + " of example " +
                                            std::to_string(p / per_example) + " is outside the vocabulary [0, " +
                                            std::to_string(vocabulary) + ")");
            const TableRows rows(static_cast<const float*>(table.get_data_handle()), dim);
            if (out_type == Dt::bf16) {
                auto* dst = static_cast<std::uint16_t*>(out.get_data_handle());
#pragma omp parallel for schedule(static)
                for (std::int64_t p = 0; p < positions; ++p) {
                    const float* r = rows.row(id[p]);
                    for (std::int64_t j = 0; j < dim; ++j) dst[p * dim + j] = wire::to_bf16(r[j]);
                }
            } else {
                auto* dst = static_cast<float*>(out.get_data_handle());
#pragma omp parallel for schedule(static)
                for (std::int64_t p = 0; p < positions; ++p)
                    std::memcpy(dst + p * dim, rows.row(id[p]), static_cast<std::size_t>(dim) * sizeof(float));
            }
        });
        if (!b.needs_input_grad(1)) return;
        const memory ddst = b.output_diff(0, plain_desc(b.output_dims(0), Dt::f32));
        const memory dtable = b.input_diff(1, plain_desc(b.input_dims(1), Dt::f32));
        b.backward([=] {
            const auto* id = static_cast<const std::int32_t*>(ids.get_data_handle());
            const auto* g = static_cast<const float*>(ddst.get_data_handle());
            auto* dt = static_cast<float*>(dtable.get_data_handle());
#pragma omp parallel
            {
                const std::int64_t threads = omp_get_num_threads(), t = omp_get_thread_num();
                const std::int64_t first = vocabulary * t / threads, last = vocabulary * (t + 1) / threads;
                std::memset(dt + first * dim, 0, static_cast<std::size_t>((last - first) * dim) * sizeof(float));
                for (std::int64_t p = 0; p < positions; ++p) {
                    if (id[p] < first || id[p] >= last || id[p] == padding) continue;
                    float* row = dt + static_cast<std::int64_t>(id[p]) * dim;
                    const float* src = g + p * dim;
                    for (std::int64_t j = 0; j < dim; ++j) row[j] += src[j];
                }
            }
        });
    }
};

// The input seen as [outer, along, inner]; the output as [outer, count, inner].
struct GatherPlan {
    std::int64_t outer = 1, along = 1, inner = 1;
    std::vector<std::int64_t> indices;  // non-negative
};

GatherPlan gather_plan(const KernelBuilder& b) {
    const auto dims = b.input_dims(0);
    const auto rank = static_cast<std::int64_t>(dims.size());
    std::int64_t axis = b.node().attrs.at("axis").get<std::int64_t>();
    if (axis < 0) axis += rank;
    GatherPlan p;
    for (std::int64_t i = 0; i < axis; ++i) p.outer *= dims[static_cast<std::size_t>(i)];
    p.along = dims[static_cast<std::size_t>(axis)];
    for (std::int64_t i = axis + 1; i < rank; ++i) p.inner *= dims[static_cast<std::size_t>(i)];
    const auto& indices = b.node().attrs.at("indices");
    if (indices.is_array()) p.indices = indices.get<std::vector<std::int64_t>>();
    else p.indices.push_back(indices.get<std::int64_t>());
    for (auto& i : p.indices)
        if (i < 0) i += p.along;
    return p;
}

class GatherKernel final : public Kernel {
  public:
    std::string label_suffix() const override { return " [hand]"; }

    // Backward reads nothing of the forward's (the indices are attributes).
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    void build(KernelBuilder& b) override {
        const GatherPlan plan = gather_plan(b);
        const Dt type = b.output_type(0);
        const memory src = b.input_plain(0, type);
        const memory dst = b.make_output(0, plain_desc(b.output_dims(0), type));
        const std::size_t bytes = type == Dt::bf16 ? 2 : 4;
        const auto count = static_cast<std::int64_t>(plan.indices.size());
        b.forward([=] {
            const auto* s = static_cast<const char*>(src.get_data_handle());
            auto* d = static_cast<char*>(dst.get_data_handle());
            const std::size_t run = static_cast<std::size_t>(plan.inner) * bytes;
#pragma omp parallel for collapse(2) schedule(static)
            for (std::int64_t o = 0; o < plan.outer; ++o)
                for (std::int64_t k = 0; k < count; ++k)
                    std::memcpy(
                        d + static_cast<std::size_t>(o * count + k) * run,
                        s + static_cast<std::size_t>(o * plan.along + plan.indices[static_cast<std::size_t>(k)]) * run,
                        run);
        });
        if (!b.needs_input_grad(0)) return;
        const memory ddst = b.output_diff(0, plain_desc(b.output_dims(0), Dt::f32));
        const memory dsrc = b.input_diff(0, plain_desc(b.input_dims(0), Dt::f32));
        b.backward([=] {
            const auto* g = static_cast<const float*>(ddst.get_data_handle());
            auto* ds = static_cast<float*>(dsrc.get_data_handle());
#pragma omp parallel for schedule(static)
            for (std::int64_t o = 0; o < plan.outer; ++o) {
                float* block = ds + o * plan.along * plan.inner;
                std::memset(block, 0, static_cast<std::size_t>(plan.along * plan.inner) * sizeof(float));
                for (std::int64_t k = 0; k < count; ++k) {
                    float* to = block + plan.indices[static_cast<std::size_t>(k)] * plan.inner;
                    const float* from = g + (o * count + k) * plan.inner;
                    for (std::int64_t j = 0; j < plan.inner; ++j) to[j] += from[j];
                }
            }
        });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_embedding_kernel() { return std::make_unique<EmbeddingKernel>(); }
std::unique_ptr<Kernel> make_gather_kernel() { return std::make_unique<GatherKernel>(); }

}  // namespace psrun::nn
