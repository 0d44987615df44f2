// Network::build: values and their memories, the gradient analysis, the kernels (fusion.h)
// and the KernelBuilder each kernel builds itself with.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "workerd/nn/buffer_lifetimes.h"
#include "workerd/nn/fusion.h"
#include "workerd/nn/loss.h"
#include "workerd/nn/network.h"
#include "workerd/nn/network_plan.h"

namespace psrun::nn {

using dnnl::memory;
using Dt = memory::data_type;

namespace {

// Address space reserved for a network's planned buffers (arena.h): far more than any plan
// needs, and only what the plan uses becomes memory.
constexpr std::size_t kArenaReserve = std::size_t{1} << 38;

class Builder final : public KernelBuilder {
public:
    Builder(NetworkPlan& plan, int index, const EngineContext& context, const StepState& step, int model_output)
        : plan_(plan), index_(index), k_(plan.kernels[static_cast<std::size_t>(index)]), context_(context),
          step_(step), model_output_(model_output) {}

    const EngineContext& context() const override { return context_; }
    const StepState& step() const override { return step_; }
    const std::vector<const Node*>& nodes() const override { return k_.nodes; }

    std::size_t input_count() const override { return k_.inputs.size(); }
    const ValueInfo& input_info(std::size_t i) const override { return in(i).info; }
    memory::dims input_dims(std::size_t i) const override { return in(i).dims; }
    const TensorDef* input_tensor(std::size_t i) const override { return in(i).tensor; }
    const memory& input(std::size_t i) const override { return in(i).mem; }

    memory input_as(std::size_t i, const memory::desc& want) override {
        ValueState& v = in(i);
        if (v.mem.get_desc() == want) return v.mem;
        for (const auto& c : v.conversions)
            if (c.get_desc() == want) return c;
        // Shared with the later readers: live until the last of them.
        memory out = buffer(want, forward_step(index_), std::max(forward_step(index_), v.last_read));
        add_reorder(k_.fwd, context_.stream, v.mem, out, false);
        v.conversions.push_back(out);
        return out;
    }

    std::size_t output_count() const override { return k_.outputs.size(); }
    memory::dims output_dims(std::size_t i) const override { return out(i).dims; }
    Dt output_type(std::size_t i) const override {
        if (out(i).info.type == ElementType::kInt) return Dt::s32;
        return k_.outputs.at(i) == model_output_ ? Dt::f32 : context_.activation_type();
    }

    memory make_output(std::size_t i, const memory::desc& desc) override {
        ValueState& v = out(i);
        memory m;
        if (kept(v) || reads_no_values()) {
            m = unplanned(desc);
        } else if (const int slot = k_.reads.in_place; i == 0 && slot >= 0) {
            const auto over = in_place_memory(plan_, context_.engine, index_, static_cast<std::size_t>(slot), v, desc);
            m = over ? *over : own_buffer(i, desc);
        } else {
            m = own_buffer(i, desc);
        }
        set_output(i, m);
        return m;
    }
    // A view of a planned buffer (an input, a conversion, scratch) keeps that buffer as long as
    // the output needs it.
    void alias_output(std::size_t i, const memory& m) override {
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

    // After build(): each kept output that is a view of a planned buffer is copied into a memory
    // of its own at the end of this kernel's forward work, and the readers built later and the
    // loss read the copy.
    void copy_kept_views() {
        for (const auto i : kept_views_) {
            ValueState& v = out(i);
            const memory copy = unplanned(v.mem.get_desc());
            add_reorder(k_.fwd, context_.stream, v.mem, copy, false);
            v.mem = copy;
        }
    }

    bool needs_backward() const override { return k_.backward; }
    bool needs_input_grad(std::size_t i) const override { return k_.backward && in(i).needs_grad && k_.reaches_loss; }

    memory output_diff(std::size_t i, const memory::desc& want) override {
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

    memory input_diff(std::size_t i, const memory::desc& have) override {
        if (!needs_input_grad(i))
            throw std::logic_error("kernel " + k_.label + " asked for the gradient of input " + std::to_string(i) +
                                   ", which needs none");
        ValueState& v = in(i);
        const int value = k_.inputs.at(i);
        const bool first = overwrites_gradient(v, value, index_, asked_values_);
        asked_values_.push_back(value);
        asked_slots_.at(i) = true;
        if (first && v.diff.get_desc() == have) return v.diff;
        memory tmp = buffer(have, backward_step(plan_, index_), backward_step(plan_, index_));
        add_reorder(k_.bwd_post, context_.stream, tmp, v.diff, !first);
        return tmp;
    }

    memory state_delta(std::size_t i) override {
        const TensorDef* t = in(i).tensor;
        if (t == nullptr || t->cls != TensorClass::kState || !context_.training)
            throw std::logic_error("kernel " + k_.label + ": input " + std::to_string(i) + " is not a state tensor");
        memory m(plain_desc(in(i).dims, Dt::f32), context_.engine, plan_.grads + t->offset);
        plan_.grad_memories.emplace_back(m, static_cast<std::size_t>(t->offset));
        return m;
    }

    // Throws when the kernel's build left out the gradient of an input that needs one.
    void check_gradients() const {
        if (auto missing = unasked_gradients(plan_, k_, asked_slots_); !missing.empty()) throw std::logic_error(missing);
    }

    memory scratch(const memory::desc& desc, bool backward_only) override {
        // The kernel of the model output or the head may make its scratch that output.
        for (const auto o : k_.outputs)
            if (kept(value(o))) return unplanned(desc);
        if (reads_no_values()) return unplanned(desc);
        const int bwd = backward_step(plan_, index_);
        if (backward_only) return buffer(desc, bwd, bwd);
        return buffer(desc, forward_step(index_), k_.backward ? bwd : forward_step(index_));
    }

    void forward(Op op) override { k_.fwd.push_back(std::move(op)); }
    void backward(Op op) override { k_.bwd.push_back(std::move(op)); }
    void note(const std::string& line) override { k_.impls.push_back(line); }

private:
    ValueState& in(std::size_t i) const { return plan_.values.at(static_cast<std::size_t>(k_.inputs.at(i))); }
    ValueState& out(std::size_t i) const { return plan_.values.at(static_cast<std::size_t>(k_.outputs.at(i))); }

    void set_output(std::size_t i, const memory& m) {
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
        v.diff = gradient_buffer(v, m.get_desc(), first, last);
    }

    // The gradient's buffer: its group's (share_gradients), placed for the whole group by the
    // first member to build, where that has the same desc; else one of its own for [first, last].
    memory gradient_buffer(const ValueState& v, const memory::desc& desc, int first, int last) {
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

    bool kept(const ValueState& v) const { return v.kept; }
    const ValueState& value(int i) const { return plan_.values.at(static_cast<std::size_t>(i)); }
    // A kernel that reads only tensors (or nothing: a constant) may fill its output once, at
    // build: its outputs and scratch stay out of the plan.
    bool reads_no_values() const {
        for (const auto i : k_.inputs)
            if (value(i).tensor == nullptr) return false;
        return true;
    }

    // Output i's buffer, placed for it alone.
    memory own_buffer(std::size_t i, const memory::desc& desc) {
        ValueState& v = out(i);
        memory m = buffer(desc, forward_step(index_), v.placed_last());
        if (plan_.arena && desc.get_size() > 0) v.own_buffer = plan_.buffers.size() - 1;
        return m;
    }
    memory unplanned(const memory::desc& desc) { return unplanned_memory(plan_, context_.engine, desc); }
    memory buffer(const memory::desc& desc, int first, int last) {
        return planned_memory(plan_, context_.engine, desc, first, last);
    }

    NetworkPlan& plan_;
    int index_;
    KernelState& k_;
    const EngineContext& context_;
    const StepState& step_;
    int model_output_;
    std::vector<std::size_t> kept_views_;  // alias_output() of a kept value onto a planned buffer
    std::vector<int> asked_values_;                         // input_diff() calls, in call order
    std::vector<bool> asked_slots_ = std::vector<bool>(k_.inputs.size(), false);
};

std::string describe(const ModelDescription& model, const KernelState& k, const NetworkOptions& o) {
    const Node& n = *k.nodes.front();
    std::ostringstream s;
    s << "layer " << k.first_node << " (" << n.op << " \"" << n.name << "\"): input "
      << to_string(model.value(n.inputs.front()).dims) << ", output " << to_string(k.nodes.back()->output_info.front().dims)
      << ", batch " << o.batch_size << ", " << to_string(o.precision);
    return s.str();
}

}  // namespace

Result<void> Network::build(std::span<const float> params, std::span<float> grads, bool plan_buffers) {
    // A build before this one (at the end) may have left offsets that need fewer bytes.
    std::vector<std::size_t> preset = plan_ ? std::move(plan_->offline_offsets) : std::vector<std::size_t>{};
    const bool again = !preset.empty() || (plan_ && plan_->online_only);
    loss_.reset();
    times_.clear();
    plan_ = std::make_unique<NetworkPlan>();
    NetworkPlan& plan = *plan_;
    plan.buffers.preset(std::move(preset));
    plan.grads = grads.data();
    const std::int64_t n = options_.batch_size;
    const EngineContext context{engine_, stream_, n, options_.precision, !options_.forward_only, options_.hand_kernels};
    const bool training = context.training;

    // Values: the inputs, the tensors, the nodes' outputs.
    auto add_value = [&](const std::string& name, const ValueInfo& info) {
        ValueState v;
        v.name = name;
        v.info = info;
        v.dims = concrete(info.dims, n);
        plan.value_index.emplace(name, static_cast<int>(plan.values.size()));
        plan.values.push_back(std::move(v));
    };
    for (const auto& in : model_.inputs) add_value(in.name, in.info);  // values 0 .. inputs - 1
    for (const auto& t : model_.tensors) {
        add_value(t.name, model_.value(t.name));
        plan.values.back().tensor = &t;
    }
    for (const auto& node : model_.nodes)
        for (std::size_t k = 0; k < node.outputs.size(); ++k) add_value(node.outputs[k], node.output_info[k]);
    auto index_of = [&](const std::string& name) { return plan.value_index.at(name); };
    plan.output = index_of(model_.output);

    // Which values need a gradient: they depend on a trainable tensor and reach the loss.
    std::vector<bool> depends(plan.values.size(), false), reaches(plan.values.size(), false);
    for (const auto& t : model_.tensors)
        if (t.cls == TensorClass::kTrainable) depends[static_cast<std::size_t>(index_of(t.name))] = true;
    for (std::size_t i = 0; i < model_.inputs.size(); ++i)
        depends[i] = options_.input_gradient && model_.inputs[i].info.type == ElementType::kFloat;
    for (const auto& node : model_.nodes) {
        bool d = false;
        for (const auto& i : node.inputs) d = d || depends[static_cast<std::size_t>(index_of(i))];
        for (const auto& o : node.outputs) depends[static_cast<std::size_t>(index_of(o))] = d;
    }
    reaches[static_cast<std::size_t>(plan.output)] = true;
    for (auto it = model_.nodes.rbegin(); it != model_.nodes.rend(); ++it) {
        bool r = false;
        for (const auto& o : it->outputs) r = r || reaches[static_cast<std::size_t>(index_of(o))];
        if (r)
            for (const auto& i : it->inputs) reaches[static_cast<std::size_t>(index_of(i))] = true;
    }
    for (std::size_t v = 0; v < plan.values.size(); ++v)
        plan.values[v].needs_grad = training && depends[v] && reaches[v] && plan.values[v].info.type == ElementType::kFloat;

    // The inputs' and the tensors' memories.
    inputs_.assign(model_.inputs.size(), InputBuffers{});
    if (model_.loss == LossKind::kGraph && model_.label_input < 0) spare_labels_.assign(static_cast<std::size_t>(n), 0);
    for (std::size_t i = 0; i < model_.inputs.size(); ++i) {
        ValueState& input = plan.values[i];
        InputBuffers& buffers = inputs_[i];
        if (model_.inputs[i].info.type == ElementType::kInt) {
            buffers.i32.assign(static_cast<std::size_t>(plain_desc(input.dims, Dt::s32).get_size() / 4), 0);
            input.mem = memory(plain_desc(input.dims, Dt::s32), engine_, buffers.i32.data());
        } else {
            buffers.f32.assign(static_cast<std::size_t>(plain_desc(input.dims, Dt::f32).get_size() / 4), 0.0f);
            input.mem = memory(plain_desc(input.dims, Dt::f32), engine_, buffers.f32.data());
            if (input.needs_grad) {
                buffers.grad.assign(buffers.f32.size(), 0.0f);
                input.diff = memory(plain_desc(input.dims, Dt::f32), engine_, buffers.grad.data());
            }
        }
    }
    for (auto& v : plan.values) {
        if (v.tensor == nullptr) continue;
        const auto offset = static_cast<std::size_t>(v.tensor->offset);
        v.mem = memory(plain_desc(v.dims, Dt::f32), engine_, const_cast<float*>(params.data() + offset));
        if (v.needs_grad) {
            v.diff = memory(plain_desc(v.dims, Dt::f32), engine_, grads.data() + offset);
            plan.grad_memories.emplace_back(v.diff, offset);
        } else if (training && v.tensor->cls == TensorClass::kTrainable) {
            plan.dead_grads.emplace_back(offset, static_cast<std::size_t>(v.tensor->size));
        }
    }

    // The kernels.
    std::map<std::string, std::vector<std::size_t>> readers;
    for (std::size_t i = 0; i < model_.nodes.size(); ++i)
        for (const auto& in : model_.nodes[i].inputs) {
            auto& r = readers[in];
            if (r.empty() || r.back() != i) r.push_back(i);
        }
    static const std::vector<std::size_t> kNone;
    FusionQuery query{model_, context, options_.hand_kernels,
                      [&](const std::string& v) -> const std::vector<std::size_t>& {
                          const auto it = readers.find(v);
                          return it == readers.end() ? kNone : it->second;
                      },
                      [&](const std::string& v) { return plan.values[static_cast<std::size_t>(index_of(v))].needs_grad; }};
    std::vector<KernelGroup> groups;
    try {
        groups = plan_kernels(query);
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kUnsupported, "model " + model_.name + ": " + e.what());
    }
    for (auto& g : groups) {
        KernelState k;
        k.first_node = g.nodes.front();
        for (const auto i : g.nodes) k.nodes.push_back(&model_.nodes[i]);
        k.kernel = std::move(g.kernel);
        // Inputs: every input of the group's nodes that no node of the group produces.
        std::vector<std::string> inner;
        for (const auto* node : k.nodes) {
            for (const auto& i : node->inputs)
                if (std::find(inner.begin(), inner.end(), i) == inner.end()) k.inputs.push_back(index_of(i));
            for (const auto& o : node->outputs) inner.push_back(o);
        }
        for (const auto& o : k.nodes.back()->outputs) k.outputs.push_back(index_of(o));
        for (const auto* node : k.nodes) {
            if (!k.label.empty()) k.label += "+";
            k.label += node->op;
        }
        k.label += k.kernel->label_suffix();
        k.reads = declared_reads_off() ? BackwardReads{} : k.kernel->backward_reads(k.nodes, context);
        for (const auto o : k.outputs) k.reaches_loss = k.reaches_loss || reaches[static_cast<std::size_t>(o)];
        bool any = false;
        for (const auto i : k.inputs) any = any || plan.values[static_cast<std::size_t>(i)].needs_grad;
        k.backward = training && any && k.reaches_loss;
        plan.kernels.push_back(std::move(k));
    }
    link_values(plan, training);
    compute_lifetimes(plan);  // buffer_lifetimes.h
    share_gradients(plan);
    if (plan_buffers && training) {
        plan.arena = std::make_unique<Arena>(kArenaReserve);
        if (!plan.arena->valid()) plan.arena.reset();
    }
    // Read after the step: the model output (outputs(), predictions()) and the heads.
    plan.values[static_cast<std::size_t>(plan.output)].kept = true;
    if (!model_.head.empty()) plan.values[static_cast<std::size_t>(plan.value_index.at(model_.head))].kept = true;
    for (const auto& h : model_.heads) plan.values[static_cast<std::size_t>(plan.value_index.at(h.value))].kept = true;

    for (std::size_t ki = 0; ki < plan.kernels.size(); ++ki) {
        auto& k = plan.kernels[ki];
        try {
            Builder builder(plan, static_cast<int>(ki), context, step_, plan.output);
            k.kernel->build(builder);
            builder.check_gradients();
            builder.copy_kept_views();
            for (std::size_t o = 0; o < k.outputs.size(); ++o)
                if (!plan.values[static_cast<std::size_t>(k.outputs[o])].mem)
                    throw std::logic_error("the kernel made no output " + std::to_string(o));
        } catch (const dnnl::error& e) {
            return make_error(ErrorCode::kUnsupported, describe(model_, k, options_) + ": oneDNN cannot build it (" +
                                                           e.what() + ", status " +
                                                           std::to_string(static_cast<int>(e.status)) + ")");
        } catch (const std::exception& e) {
            return make_error(ErrorCode::kUnsupported, describe(model_, k, options_) + ": cannot build it: " + e.what());
        }
        times_.push_back(LayerTime{static_cast<int>(k.first_node), k.label, k.nodes.front()->name, 0, 0});
    }
    if (poison_requested()) plan_poison(plan);
    const ValueState& out = plan.values[static_cast<std::size_t>(plan.output)];
    try {
        dnnl::memory head;
        if (!model_.head.empty()) head = plan.values[static_cast<std::size_t>(plan.value_index.at(model_.head))].mem;
        std::vector<dnnl::memory> heads;
        for (const auto& h : model_.heads)
            heads.push_back(plan.values[static_cast<std::size_t>(plan.value_index.at(h.value))].mem);
        loss_ = std::make_unique<Loss>(engine_, stream_, out.mem, out.diff, model_.loss, model_.reduction,
                                       options_.label_smoothing, head, heads);
    } catch (const std::exception& e) {
        return make_error(ErrorCode::kUnsupported, "model " + model_.name + ": the loss on the output " +
                                                       to_string(out.info.dims) + " cannot be built: " + e.what());
    }
    times_.push_back(LayerTime{static_cast<int>(model_.nodes.size()), "loss", "loss", 0, 0});
    // The offsets were chosen as the kernels built, each before the buffers to come were known.
    // Placed again with all of them known, largest first: where that needs fewer bytes, build
    // again (the same kernels ask for the same buffers in the same order) with those offsets. If
    // that build fails, a third places as this one did.
    if (plan.arena && !again) {
        std::size_t bytes = 0;
        std::vector<std::size_t> offsets = plan.buffers.offline_offsets(bytes);
        if (bytes < plan.buffers.arena_bytes()) {
            plan.offline_offsets = std::move(offsets);
            if (auto placed = build(params, grads, plan_buffers)) return placed;
            plan_->online_only = true;
            return build(params, grads, plan_buffers);
        }
    }
    return {};
}

}  // namespace psrun::nn
