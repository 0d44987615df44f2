// The parameter kernel (its output is its tensor; the gradient passes through) and the
// constant kernel (its output is filled once, at build), the batch_range kernel (0 .. N-1).
#include <cstring>
#include <memory>

#include "workerd/nn/kernel.h"
#include "workerd/nn/op_schema.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

class ParameterKernel final : public Kernel {
  public:
    void build(KernelBuilder& b) override {
        const memory& tensor = b.input(0);
        b.alias_output(0, tensor);
        if (!b.needs_input_grad(0)) return;
        const memory ddst = b.output_diff(0, tensor.get_desc());
        const memory dsrc = b.input_diff(0, tensor.get_desc());
        b.backward([ddst, dsrc] {
            if (ddst.get_data_handle() != dsrc.get_data_handle())
                std::memcpy(dsrc.get_data_handle(), ddst.get_data_handle(), ddst.get_desc().get_size());
        });
    }
};

class ConstantKernel final : public Kernel {
  public:
    void build(KernelBuilder& b) override {
        const auto& attrs = b.node().attrs;
        const bool ints = attrs.at("type") == "int";
        const memory out = b.make_output(0, plain_desc(b.output_dims(0), ints ? Dt::s32 : Dt::f32));
        const std::size_t count = out.get_desc().get_size() / 4;
        if (ints) {
            auto* p = static_cast<std::int32_t*>(out.get_data_handle());
            if (attrs.contains("fill"))
                std::fill(p, p + count, static_cast<std::int32_t>(attrs.at("fill").get<std::int64_t>()));
            else
                for (std::size_t i = 0; i < count; ++i)
                    p[i] = static_cast<std::int32_t>(attrs.at("values")[i].get<std::int64_t>());
        } else {
            auto* p = static_cast<float*>(out.get_data_handle());
            if (attrs.contains("fill")) std::fill(p, p + count, attrs.at("fill").get<float>());
            else
                for (std::size_t i = 0; i < count; ++i) p[i] = constant_float(attrs.at("values")[i]);
        }
    }
};

// 0 .. N-1, written by each forward (the output may be a planned buffer).
class BatchRangeKernel final : public Kernel {
  public:
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        return BackwardReads::nothing();
    }

    void build(KernelBuilder& b) override {
        const memory out = b.make_output(0, plain_desc(b.output_dims(0), Dt::s32));
        b.forward([out] {
            auto* p = static_cast<std::int32_t*>(out.get_data_handle());
            const auto n = static_cast<std::int32_t>(out.get_desc().get_size() / sizeof(std::int32_t));
            for (std::int32_t i = 0; i < n; ++i) p[i] = i;
        });
        b.note("fwd: hand batch_range");
    }
};

}  // namespace

std::unique_ptr<Kernel> make_batch_range_kernel() { return std::make_unique<BatchRangeKernel>(); }
std::unique_ptr<Kernel> make_parameter_kernel() { return std::make_unique<ParameterKernel>(); }
std::unique_ptr<Kernel> make_constant_kernel() { return std::make_unique<ConstantKernel>(); }

}  // namespace psrun::nn
