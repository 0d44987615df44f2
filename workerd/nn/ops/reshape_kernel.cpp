// The layout-only kernels (reshape, flatten, squeeze, unsqueeze): the output is a view of the
// input in its plain layout (the input converted to plain only where its producer chose
// another format); backward copies the gradient back (same bytes, the input's dims).
#include <cstring>
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;

namespace {

class ViewKernel final : public Kernel {
  public:
    // A copy of the gradient: nothing; the output is a view of the input.
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads{0, false, -1, 0};
    }

    void build(KernelBuilder& b) override {
        const auto type = b.input(0).get_desc().data_type();
        const memory src = b.input_plain(0, type);
        const memory view(plain_desc(b.output_dims(0), type), b.context().engine, src.get_data_handle());
        b.alias_output(0, view);
        if (!b.needs_input_grad(0)) return;
        const memory ddst = b.output_diff(0, view.get_desc());
        const memory dsrc = b.input_diff(0, src.get_desc());
        b.backward(
            [ddst, dsrc] { std::memcpy(dsrc.get_data_handle(), ddst.get_data_handle(), dsrc.get_desc().get_size()); });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_view_kernel() { return std::make_unique<ViewKernel>(); }

}  // namespace psrun::nn
