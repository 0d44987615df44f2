// PlanBuilder: the KernelBuilder (kernel.h) that Network::build hands kernel `index` of a
// NetworkPlan. It gives the kernel its inputs (converted on request), places its outputs,
// conversions, gradients and scratch in the plan's buffers for the steps they live
// (buffer_lifetimes.h), and appends the kernel's forward and backward ops to its KernelState.
// One per kernel, alive for that kernel's build() only; it holds references into `plan`, which
// must outlive it. Not thread-safe.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "workerd/nn/buffer_lifetimes.h"
#include "workerd/nn/kernel.h"
#include "workerd/nn/network_plan.h"

namespace psrun::nn {

class PlanBuilder final : public KernelBuilder {
    using memory = dnnl::memory;
    using Dt = dnnl::memory::data_type;

  public:
    PlanBuilder(NetworkPlan& plan, int index, const EngineContext& context, const StepState& step, int model_output)
        : plan_(plan),
          index_(index),
          k_(plan.kernels[static_cast<std::size_t>(index)]),
          context_(context),
          step_(step),
          model_output_(model_output) {}

    const EngineContext& context() const override { return context_; }
    const StepState& step() const override { return step_; }
    const std::vector<const Node*>& nodes() const override { return k_.nodes; }

    std::size_t input_count() const override { return k_.inputs.size(); }
    const ValueInfo& input_info(std::size_t i) const override { return in(i).info; }
    memory::dims input_dims(std::size_t i) const override { return in(i).dims; }
    const TensorDef* input_tensor(std::size_t i) const override { return in(i).tensor; }
    const memory& input(std::size_t i) const override { return in(i).mem; }

    memory input_as(std::size_t i, const memory::desc& want) override;

    std::size_t output_count() const override { return k_.outputs.size(); }
    memory::dims output_dims(std::size_t i) const override { return out(i).dims; }
    Dt output_type(std::size_t i) const override;

    memory make_output(std::size_t i, const memory::desc& desc) override;
    // A view of a planned buffer (an input, a conversion, scratch) keeps that buffer as long as
    // the output needs it.
    void alias_output(std::size_t i, const memory& m) override;

    // After build(): each kept output that is a view of a planned buffer is copied into a memory
    // of its own at the end of this kernel's forward work, and the readers built later and the
    // loss read the copy.
    void copy_kept_views();

    bool needs_backward() const override { return k_.backward; }
    bool needs_input_grad(std::size_t i) const override { return k_.backward && in(i).needs_grad && k_.reaches_loss; }

    memory output_diff(std::size_t i, const memory::desc& want) override;
    memory input_diff(std::size_t i, const memory::desc& have) override;
    memory state_delta(std::size_t i) override;

    // Throws when the kernel's build left out the gradient of an input that needs one.
    void check_gradients() const;

    memory scratch(const memory::desc& desc, bool backward_only) override;

    void forward(Op op) override { k_.fwd.push_back(std::move(op)); }
    void backward(Op op) override { k_.bwd.push_back(std::move(op)); }
    void note(const std::string& line) override { k_.impls.push_back(line); }

  private:
    ValueState& in(std::size_t i) const { return plan_.values.at(static_cast<std::size_t>(k_.inputs.at(i))); }
    ValueState& out(std::size_t i) const { return plan_.values.at(static_cast<std::size_t>(k_.outputs.at(i))); }

    void set_output(std::size_t i, const memory& m);

    // The gradient's buffer: its group's (share_gradients), placed for the whole group by the
    // first member to build, where that has the same desc; else one of its own for [first, last].
    memory gradient_buffer(const ValueState& v, const memory::desc& desc, int first, int last);

    bool kept(const ValueState& v) const { return v.kept; }
    const ValueState& value(int i) const { return plan_.values.at(static_cast<std::size_t>(i)); }
    // A kernel that reads only tensors (or nothing: a constant) may fill its output once, at
    // build: its outputs and scratch stay out of the plan.
    bool reads_no_values() const;

    // Output i's buffer, placed for it alone.
    memory own_buffer(std::size_t i, const memory::desc& desc);
    memory unplanned(const memory::desc& desc) { return unplanned_memory(plan_, context_.engine, desc); }
    memory buffer(const memory::desc& desc, int first, int last);

    NetworkPlan& plan_;
    int index_;
    KernelState& k_;
    const EngineContext& context_;
    const StepState& step_;
    int model_output_;
    std::vector<std::size_t> kept_views_;  // alias_output() of a kept value onto a planned buffer
    std::vector<int> asked_values_;        // input_diff() calls, in call order
    std::vector<bool> asked_slots_ = std::vector<bool>(k_.inputs.size(), false);
};

}  // namespace psrun::nn
