#include "workerd/nn/plan_builder.h"

#include <algorithm>
#include <stdexcept>
#include <vector>

namespace psrun::nn {

using dnnl::memory;
using Dt = memory::data_type;

memory PlanBuilder::input_as(std::size_t i, const memory::desc& want) {
    ValueState& v = in(i);
    // Where the build before converted this input for this backward, the value's lifetime left the
    // backward out: a conversion must serve it even where none is needed now (a copy).
    const bool through_conversion = k_.reads_through_conversion(i);
    if (v.mem.get_desc() == want && !through_conversion) return v.mem;
    if (i < 64) k_.converted |= std::uint64_t{1} << i;
    for (const auto& c : v.conversions)
        if (c.get_desc() == want) return c;
    // Shared with the later readers: live until the last of them, backward reads through a
    // conversion included (an earlier reader never reads it).
    const int here = forward_step(index_);
    memory out = buffer(want, here, conversion_last(plan_, k_.inputs.at(i), index_));
    // Ahead of the kernel's own forward work: a backward's build may ask for a conversion after
    // the forward wrote its output over this input (in place), and the copy must be the input's.
    std::vector<Op> convert;
    add_reorder(convert, context_.stream, v.mem, out, false);
    k_.fwd.insert(k_.fwd.begin(), convert.begin(), convert.end());
    v.conversions.push_back(out);
    return out;
}

Dt PlanBuilder::output_type(std::size_t i) const {
    if (out(i).info.type == ElementType::kInt) return Dt::s32;
    return k_.outputs.at(i) == model_output_ ? Dt::f32 : context_.activation_type();
}

memory PlanBuilder::make_output(std::size_t i, const memory::desc& desc) {
    ValueState& v = out(i);
    memory m;
    if (kept(v) || reads_no_values()) {
        m = unplanned(desc);
    } else if (const int slot = k_.in_place; i == 0 && slot >= 0) {
        const auto over = in_place_memory(plan_, context_.engine, index_, static_cast<std::size_t>(slot), v, desc);
        m = over ? *over : own_buffer(i, desc);
    } else {
        m = own_buffer(i, desc);
    }
    set_output(i, m);
    return m;
}

void PlanBuilder::alias_output(std::size_t i, const memory& m) {
    set_output(i, m);
    if (!plan_.arena) return;
    const char* at = static_cast<const char*>(m.get_data_handle());
    const char* base = plan_.arena->base();
    if (at < base || at >= base + plan_.arena->reserved()) return;  // not planned: an input, a tensor
    const ValueState& v = out(i);
    const std::size_t id = plan_.buffers.find(static_cast<std::size_t>(at - base), forward_step(index_));
    if (id == BufferPlan::kNone || !plan_.buffers.extend(id, v.placed_last())) {
        plan_.plan_failed = true;
        throw std::runtime_error("buffer plan: output " + std::to_string(i) + " is a view that outlives its buffer");
    }
    // Read after the step (the model output, the head: a flatten's view): a copy of its own.
    if (kept(v)) kept_views_.push_back(i);
}

void PlanBuilder::copy_kept_views() {
    for (const auto i : kept_views_) {
        ValueState& v = out(i);
        const memory copy = unplanned(v.mem.get_desc());
        add_reorder(k_.fwd, context_.stream, v.mem, copy, false);
        v.mem = copy;
    }
}

memory PlanBuilder::output_diff(std::size_t i, const memory::desc& want) {
    ValueState& v = out(i);
    if (!v.diff) {  // nobody reads this output: its gradient is 0
        plan_.unplanned_bytes += BufferPlan::aligned(want.get_size());
        return zeroed_memory(want, context_.engine);
    }
    if (v.diff.get_desc() == want) return v.diff;
    memory m = buffer(want, backward_step(plan_, index_), backward_step(plan_, index_));
    add_reorder(k_.bwd_pre, context_.stream, v.diff, m, false);
    return m;
}

memory PlanBuilder::input_diff(std::size_t i, const memory::desc& have) {
    if (!needs_input_grad(i))
        throw std::logic_error("kernel " + k_.label + " asked for the gradient of input " + std::to_string(i) +
                               ", which needs none");
    ValueState& v = in(i);
    const int value = k_.inputs.at(i);
    const bool first = overwrites_gradient(v, value, index_, asked_values_);
    asked_values_.push_back(value);
    asked_slots_.at(i) = true;
    if (first && v.diff.get_desc() == have) return v.diff;
    // The first build learns the desc the first writer wants (BuildLessons::grad_candidates).
    if (first && plan_.arena && !plan_.lessons.known && v.grad_group < 0 && !v.kept &&
        have.dims() == v.diff.get_desc().dims())
        plan_.lessons.grad_candidates.emplace(value, have);
    memory tmp = buffer(have, backward_step(plan_, index_), backward_step(plan_, index_));
    add_reorder(k_.bwd_post, context_.stream, tmp, v.diff, !first);
    return tmp;
}

memory PlanBuilder::state_delta(std::size_t i) {
    const TensorDef* t = in(i).tensor;
    if (t == nullptr || t->cls != TensorClass::kState || !context_.training)
        throw std::logic_error("kernel " + k_.label + ": input " + std::to_string(i) + " is not a state tensor");
    memory m(plain_desc(in(i).dims, Dt::f32), context_.engine, plan_.grads + t->offset);
    plan_.grad_memories.emplace_back(m, static_cast<std::size_t>(t->offset));
    return m;
}

void PlanBuilder::check_gradients() const {
    if (auto missing = unasked_gradients(plan_, k_, asked_slots_); !missing.empty()) throw std::logic_error(missing);
}

memory PlanBuilder::scratch(const memory::desc& desc, bool backward_only) {
    // The kernel of the model output or the head may make its scratch that output.
    for (const auto o : k_.outputs)
        if (kept(value(o))) return unplanned(desc);
    if (reads_no_values()) return unplanned(desc);
    const int bwd = backward_step(plan_, index_);
    if (backward_only) return buffer(desc, bwd, bwd);
    return buffer(desc, forward_step(index_), k_.backward ? bwd : forward_step(index_));
}

void PlanBuilder::set_output(std::size_t i, const memory& m) {
    ValueState& v = out(i);
    if (v.mem) throw std::logic_error("kernel " + k_.label + " set output " + std::to_string(i) + " twice");
    // A scalar's memory is plain_desc's {1}.
    if (m.get_desc().dims() != (v.dims.empty() ? memory::dims{1} : v.dims))
        throw std::logic_error("kernel " + k_.label + " made output " + std::to_string(i) + " with other dims");
    v.mem = m;
    if (!v.needs_grad || !context_.training) return;
    // The loss writes the output's; without planning, as ever: a zeroed buffer of its own.
    int first = 0, last = 0;
    if (kept(v) || !plan_.arena || !gradient_steps(plan_, v, index_, k_.backward, first, last)) {
        plan_.unplanned_bytes += BufferPlan::aligned(m.get_desc().get_size());
        v.diff = zeroed_memory(m.get_desc(), context_.engine);
        return;
    }
    const auto& descs = plan_.lessons.grad_descs;
    const auto learned = descs.find(k_.outputs.at(i));
    v.diff = gradient_buffer(v, learned != descs.end() ? learned->second : m.get_desc(), first, last);
}

memory PlanBuilder::gradient_buffer(const ValueState& v, const memory::desc& desc, int first, int last) {
    if (v.grad_group < 0) return buffer(desc, first, last);
    GradientGroup& g = plan_.grad_groups.at(static_cast<std::size_t>(v.grad_group));
    if (!g.mem) {
        g.mem = buffer(desc, g.first, g.last);
        return g.mem;
    }
    if (g.mem.get_desc() != desc) return buffer(desc, first, last);
    plan_.shared_grad_bytes += BufferPlan::aligned(desc.get_size());
    return g.mem;
}

bool PlanBuilder::reads_no_values() const {
    for (const auto i : k_.inputs)
        if (value(i).tensor == nullptr) return false;
    return true;
}

memory PlanBuilder::own_buffer(std::size_t i, const memory::desc& desc) {
    ValueState& v = out(i);
    memory m = buffer(desc, forward_step(index_), v.placed_last());
    if (plan_.arena && desc.get_size() > 0) v.own_buffer = plan_.buffers.size() - 1;
    return m;
}

memory PlanBuilder::buffer(const memory::desc& desc, int first, int last) {
    return planned_memory(plan_, context_.engine, desc, first, last);
}

}  // namespace psrun::nn
