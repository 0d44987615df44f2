// The transpose kernel: a oneDNN reorder from the input's plain layout, read through permuted
// strides, into the output's plain layout; backward is the inverse permutation.
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;

namespace {

// The plain desc of `dims` seen with its axes permuted: axis i of the result is axis perm[i].
memory::desc permuted(const memory::dims& dims, memory::data_type type, const std::vector<std::int64_t>& perm) {
    memory::dims strides(dims.size(), 1);
    for (std::size_t i = dims.size(); i-- > 1;) strides[i - 1] = strides[i] * dims[i];
    memory::dims out_dims, out_strides;
    for (const auto p : perm) {
        out_dims.push_back(dims[static_cast<std::size_t>(p)]);
        out_strides.push_back(strides[static_cast<std::size_t>(p)]);
    }
    return memory::desc(out_dims, type, out_strides);
}

class TransposeKernel final : public Kernel {
  public:
    // The gradient transposed back: nothing.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads = BackwardReads::nothing();
        reads.keeps_output_grad = true;
        return reads;
    }

    void build(KernelBuilder& b) override {
        const auto perm = b.node().attrs.at("perm").get<std::vector<std::int64_t>>();
        const auto type = b.input(0).get_desc().data_type();
        const memory src = b.input_plain(0, type);
        const auto& engine = b.context().engine;
        const memory view(permuted(b.input_dims(0), type, perm), engine, src.get_data_handle());
        const memory dst = b.make_output(0, plain_desc(b.output_dims(0), type));
        reorder fwd(view, dst);
        b.forward(fwd, {{DNNL_ARG_FROM, view}, {DNNL_ARG_TO, dst}});
        if (!b.needs_input_grad(0)) return;
        const memory ddst = b.output_diff(0, dst.get_desc());
        const memory dsrc = b.input_diff(0, src.get_desc());
        const memory dview(permuted(b.input_dims(0), type, perm), engine, dsrc.get_data_handle());
        b.backward(reorder(ddst, dview), {{DNNL_ARG_FROM, ddst}, {DNNL_ARG_TO, dview}});
    }
};

}  // namespace

std::unique_ptr<Kernel> make_transpose_kernel() { return std::make_unique<TransposeKernel>(); }

}  // namespace psrun::nn
