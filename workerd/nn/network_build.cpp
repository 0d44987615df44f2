// Network::build: values and their memories, the gradient analysis, the kernels (fusion.h),
// each built with a PlanBuilder (plan_builder.h), the loss, and the second placement pass.
#include <algorithm>
#include <cstring>
#include <sstream>
#include <stdexcept>

#include "workerd/nn/buffer_lifetimes.h"
#include "workerd/nn/fusion.h"
#include "workerd/nn/loss.h"
#include "workerd/nn/network.h"
#include "workerd/nn/network_plan.h"
#include "workerd/nn/plan_builder.h"

namespace psrun::nn {

using dnnl::memory;
using Dt = memory::data_type;

namespace {

// Address space reserved for a network's planned buffers (arena.h): far more than any plan
// needs, and only what the plan uses becomes memory.
constexpr std::size_t kArenaReserve = std::size_t{1} << 38;

std::string describe(const ModelDescription& model, const KernelState& k, const NetworkOptions& o) {
    const Node& n = *k.nodes.front();
    std::ostringstream s;
    s << "layer " << k.first_node << " (" << n.op << " \"" << n.name << "\"): input "
      << to_string(model.value(n.inputs.front()).dims) << ", output "
      << to_string(k.nodes.back()->output_info.front().dims) << ", batch " << o.batch_size << ", "
      << to_string(o.precision);
    return s.str();
}

}  // namespace

Result<void> Network::build(std::span<const float> params, std::span<float> grads, bool plan_buffers) {
    // A build before this one (at the end) may have left offsets that need fewer bytes.
    std::vector<std::size_t> preset = plan_ ? std::move(plan_->offline_offsets) : std::vector<std::size_t>{};
    const bool again = !preset.empty() || (plan_ && plan_->online_only);
    // What a build before learned (BuildLessons), kept for every build after.
    const bool learned = plan_ && plan_->lessons.known;
    BuildLessons lessons = plan_ ? std::move(plan_->lessons) : BuildLessons{};
    loss_.reset();
    times_.clear();
    plan_ = std::make_unique<NetworkPlan>();
    NetworkPlan& plan = *plan_;
    plan.buffers.preset(std::move(preset));
    plan.lessons = std::move(lessons);
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
        plan.values[v].needs_grad =
            training && depends[v] && reaches[v] && plan.values[v].info.type == ElementType::kFloat;

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
    FusionQuery query{
        model_, context, options_.hand_kernels,
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
        if (plan.kernels.size() < plan.lessons.converted.size())
            k.converted_before = plan.lessons.converted[plan.kernels.size()];
        for (const auto o : k.outputs) k.reaches_loss = k.reaches_loss || reaches[static_cast<std::size_t>(o)];
        bool any = false;
        for (const auto i : k.inputs) any = any || plan.values[static_cast<std::size_t>(i)].needs_grad;
        k.backward = training && any && k.reaches_loss;
        // Reads only some inputs' gradients need (BackwardReads::input_for, outputs_for).
        auto wanted = [&](std::uint64_t slots) {
            for (std::size_t s = 0; s < k.inputs.size() && s < 64; ++s)
                if ((slots >> s & 1u) && plan.values[static_cast<std::size_t>(k.inputs[s])].needs_grad) return true;
            return false;
        };
        for (std::size_t s = 0; s < k.reads.input_for.size(); ++s)
            if (k.reads.input_for[s] != 0 && !wanted(k.reads.input_for[s])) k.reads.inputs &= ~(std::uint64_t{1} << s);
        if (k.reads.outputs_for != 0 && !wanted(k.reads.outputs_for)) k.reads.outputs = false;
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
            PlanBuilder builder(plan, static_cast<int>(ki), context, step_, plan.output);
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
            return make_error(ErrorCode::kUnsupported,
                              describe(model_, k, options_) + ": cannot build it: " + e.what());
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
    // A backward that reads an input only as converted, where this build converted it, or a
    // gradient that could not use its group's buffer: build again knowing that (the value then
    // dies at its last forward read, only the conversion is kept; the gradient is left out of the
    // group).
    BuildLessons& l = plan.lessons;
    if (plan.arena && !learned) {
        bool useful = false;
        l.converted.clear();
        for (const auto& k : plan.kernels) {
            l.converted.push_back(k.converted);
            useful = useful || (k.backward && (k.converted & k.reads.as_converted & k.reads.inputs) != 0);
        }
        l.unshared = unshared_gradients(plan);
        useful = useful || !l.unshared.empty() || !l.grad_candidates.empty();
        l.known = true;
        if (useful) return build(params, grads, plan_buffers);
    }
    // Gradients in their first writers' descs (BuildLessons::grad_candidates): a build tries them
    // after one without, and the one that needs fewer bytes (placed with all buffers known) stays.
    if (plan.arena && !again && !l.grad_candidates.empty() && l.grad_trial != 2) {
        std::size_t bytes = 0;
        plan.buffers.offline_offsets(bytes);
        if (l.grad_trial == 0) {
            l.bytes_without_grad_descs = bytes;
            l.grad_trial = 1;
            l.grad_descs = l.grad_candidates;
            return build(params, grads, plan_buffers);
        }
        l.grad_trial = 2;
        if (bytes >= l.bytes_without_grad_descs) {
            l.grad_descs.clear();
            return build(params, grads, plan_buffers);
        }
    }
    // The offsets were chosen as the kernels built, each before the buffers to come were known.
    // Placed again with all of them known (offline_offsets: the best of three orders): where
    // that needs fewer bytes, build again (the same kernels ask for the same buffers in the same
    // order) with those offsets. If that build fails, a third places as this one did.
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
