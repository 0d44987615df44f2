#include "workerd/nn/buffer_lifetimes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <stdexcept>
#include <string>

namespace psrun::nn {

void link_values(NetworkPlan& plan, bool training) {
    for (std::size_t ki = 0; ki < plan.kernels.size(); ++ki) {
        auto& k = plan.kernels[ki];
        for (const auto o : k.outputs) plan.values[static_cast<std::size_t>(o)].producer = static_cast<int>(ki);
        if (!k.backward) continue;
        for (std::size_t s = 0; s < k.inputs.size(); ++s) {
            auto& v = plan.values[static_cast<std::size_t>(k.inputs[s])];
            if (v.needs_grad) v.writers.emplace_back(static_cast<int>(ki), s);
        }
    }
    plan.values[static_cast<std::size_t>(plan.output)].loss_writes = training;
}

void compute_lifetimes(NetworkPlan& plan) {
    for (std::size_t ki = 0; ki < plan.kernels.size(); ++ki) {
        const auto& k = plan.kernels[ki];
        const int fwd = forward_step(static_cast<int>(ki));
        const int bwd = k.backward ? backward_step(plan, static_cast<int>(ki)) : fwd;
        for (std::size_t s = 0; s < k.inputs.size(); ++s) {
            auto& v = plan.values[static_cast<std::size_t>(k.inputs[s])];
            // A backward reading it through a conversion keeps the conversion (conversion_last).
            const bool via_conversion = k.reads_through_conversion(s);
            v.last_read = std::max(v.last_read, k.reads.reads_input(s) && !via_conversion ? bwd : fwd);
        }
        for (const auto o : k.outputs) {
            auto& v = plan.values[static_cast<std::size_t>(o)];
            v.last = std::max(v.last, k.reads.outputs ? bwd : fwd);
        }
    }
    // A view's input (and the conversion it may view) lives as long as the view: last to first,
    // so that a view of a view reaches the first input.
    for (auto& v : plan.values) v.last = std::max(v.last, v.last_read);
    for (std::size_t ki = plan.kernels.size(); ki-- > 0;) {
        const auto& k = plan.kernels[ki];
        const int slot = k.reads.view;
        if (slot < 0 || static_cast<std::size_t>(slot) >= k.inputs.size() || k.outputs.empty()) continue;
        auto& in = plan.values[static_cast<std::size_t>(k.inputs[static_cast<std::size_t>(slot)])];
        const auto& out = plan.values[static_cast<std::size_t>(k.outputs.front())];
        in.last_read = std::max(in.last_read, out.last);
        in.last = std::max(in.last, in.last_read);
    }
    // In place, chosen before any buffer is placed so that the input's buffer is placed for the
    // output's lifetime too: where the input dies at the kernel's forward; last to first, so that
    // a chain (add then relu over it) holds the first buffer to the end.
    for (std::size_t ki = plan.kernels.size(); ki-- > 0;) {
        auto& k = plan.kernels[ki];
        if (k.outputs.empty()) continue;
        const auto& out = plan.values[static_cast<std::size_t>(k.outputs.front())];
        for (const int slot : {k.reads.in_place, k.reads.in_place_else}) {
            if (slot < 0 || static_cast<std::size_t>(slot) >= k.inputs.size()) continue;
            const int value = k.inputs[static_cast<std::size_t>(slot)];
            if (std::count(k.inputs.begin(), k.inputs.end(), value) != 1) continue;
            auto& in = plan.values[static_cast<std::size_t>(value)];
            if (in.producer < 0 || in.kept || out.kept || in.last != forward_step(static_cast<int>(ki))) continue;
            // A view has no buffer of its own to write over (in_place_memory refuses it), and a
            // hold on it would outlast the buffer it views, placed by then (a reshape before a
            // softmax in attention: the whole plan failed and fell back to one buffer each).
            const KernelState& producer = plan.kernels[static_cast<std::size_t>(in.producer)];
            if (producer.reads.view >= 0 && !producer.outputs.empty() && producer.outputs.front() == value) continue;
            if (in.dims != out.dims || in.info.type != out.info.type) continue;
            k.in_place = slot;
            in.hold = std::max(in.hold, out.placed_last());
            break;
        }
    }
}

namespace {

// Whether kernel k's backward copies its output's gradient, unchanged, into the gradient of input
// slot `slot` (BackwardReads::copies_output_grad), with every input the output's shape.
bool copies_output_gradient(const NetworkPlan& plan, const KernelState& k, std::size_t slot) {
    if (k.outputs.size() != 1 || slot >= k.inputs.size() || !k.reads.copies_output_grad_to(slot)) return false;
    const auto& dims = plan.values[static_cast<std::size_t>(k.outputs.front())].dims;
    for (const auto i : k.inputs)
        if (plan.values[static_cast<std::size_t>(i)].dims != dims) return false;
    return true;
}

// Whether kernel k's backward may write input slot `slot`'s gradient over its output's
// (BackwardReads::grad_over_output), the two of the same dims.
bool writes_over_output_gradient(const NetworkPlan& plan, const KernelState& k, std::size_t slot) {
    if (k.outputs.size() != 1 || slot >= k.inputs.size() || !k.reads.writes_grad_over_output(slot)) return false;
    return plan.values[static_cast<std::size_t>(k.outputs.front())].dims ==
           plan.values[static_cast<std::size_t>(k.inputs[slot])].dims;
}

}  // namespace

void share_gradients(NetworkPlan& plan) {
    plan.grad_groups.clear();
    for (auto& v : plan.values) v.grad_group = -1;
    if (declared_reads_off()) return;
    // Backward order (last kernel first): a group grows from an add's output down its inputs.
    for (std::size_t ki = plan.kernels.size(); ki-- > 0;) {
        const KernelState& k = plan.kernels[ki];
        const bool copies = k.reads.copies_output_grad != 0;
        if (!k.backward || (!copies && k.reads.grad_over_output == 0)) continue;
        const int here = static_cast<int>(ki);
        const int t = backward_step(plan, here);
        const int c = k.outputs.front();
        ValueState& out = plan.values[static_cast<std::size_t>(c)];
        int out_first = 0, out_last = 0;
        if (!out.needs_grad || out.kept || out.producer != here ||
            !gradient_steps(plan, out, here, true, out_first, out_last))
            continue;
        if (out.grad_group >= 0) {  // what the buffer held before must have ended
            bool ended = true;
            for (const auto& [m, last] : plan.grad_groups[static_cast<std::size_t>(out.grad_group)].members)
                if (m != c && last >= t) ended = false;
            if (!ended) continue;
        }
        struct Candidate {
            int value, last, change;  // change: the first step after t that may write it (max: none)
        };
        std::vector<Candidate> candidates;
        for (std::size_t s = 0; s < k.inputs.size(); ++s) {
            if (!copies_output_gradient(plan, k, s) && !writes_over_output_gradient(plan, k, s)) continue;
            const int vi = k.inputs[s];
            if (std::count(k.inputs.begin(), k.inputs.end(), vi) != 1) continue;
            const ValueState& v = plan.values[static_cast<std::size_t>(vi)];
            if (!v.needs_grad || v.kept || v.tensor != nullptr || v.producer < 0 || v.grad_group >= 0) continue;
            if (std::find(plan.lessons.unshared.begin(), plan.lessons.unshared.end(), vi) !=
                plan.lessons.unshared.end())
                continue;
            int first = 0, last = 0;
            const bool producer_backward = plan.kernels[static_cast<std::size_t>(v.producer)].backward;
            if (!gradient_steps(plan, v, v.producer, producer_backward, first, last) || first != t) continue;
            int change = plan.kernels[static_cast<std::size_t>(v.producer)].reads.keeps_output_grad
                             ? std::numeric_limits<int>::max()
                             : last;
            for (const auto& w : v.writers)
                if (w.first != here) change = std::min(change, backward_step(plan, w.first));
            candidates.push_back(Candidate{vi, last, change});
        }
        std::sort(candidates.begin(), candidates.end(),
                  [](const Candidate& a, const Candidate& b) { return a.last < b.last; });
        if (!copies && candidates.size() > 1)  // one gradient over the output's
            candidates.erase(candidates.begin() + 1, candidates.end());
        std::vector<Candidate> chosen;
        for (const auto& cand : candidates) {
            bool apart = true;
            for (const auto& o : chosen) apart = apart && o.last < cand.change && cand.last < o.change;
            if (apart) chosen.push_back(cand);
        }
        if (chosen.empty()) continue;
        if (out.grad_group < 0) {
            out.grad_group = static_cast<int>(plan.grad_groups.size());
            GradientGroup g;
            g.first = out_first;
            g.last = out_last;
            g.members.emplace_back(c, out_last);
            plan.grad_groups.push_back(std::move(g));
        }
        GradientGroup& g = plan.grad_groups[static_cast<std::size_t>(out.grad_group)];
        for (const auto& cand : chosen) {
            g.members.emplace_back(cand.value, cand.last);
            g.last = std::max(g.last, cand.last);
            plan.values[static_cast<std::size_t>(cand.value)].grad_group = out.grad_group;
        }
    }
}

int conversion_last(const NetworkPlan& plan, int value, int from) {
    int last = forward_step(from);
    for (std::size_t ki = static_cast<std::size_t>(from); ki < plan.kernels.size(); ++ki) {
        const auto& k = plan.kernels[ki];
        for (std::size_t s = 0; s < k.inputs.size(); ++s) {
            if (k.inputs[s] != value) continue;
            last = std::max(last, forward_step(static_cast<int>(ki)));
            if (k.backward && k.reads.reads_input(s)) last = std::max(last, backward_step(plan, static_cast<int>(ki)));
            if (k.reads.view == static_cast<int>(s) && !k.outputs.empty())
                last = std::max(last, plan.values[static_cast<std::size_t>(k.outputs.front())].last);
        }
    }
    return last;
}

std::vector<int> unshared_gradients(const NetworkPlan& plan) {
    std::vector<int> out;
    for (const auto& g : plan.grad_groups) {
        const auto& first = plan.values[static_cast<std::size_t>(g.members.front().first)].diff;
        for (std::size_t m = 1; m < g.members.size(); ++m) {
            const auto& diff = plan.values[static_cast<std::size_t>(g.members[m].first)].diff;
            if (first && diff && diff.get_desc() != first.get_desc()) out.push_back(g.members[m].first);
        }
    }
    std::sort(out.begin(), out.end());
    return out;
}

bool gradient_steps(const NetworkPlan& plan, const ValueState& v, int producer, bool producer_backward, int& first,
                    int& last) {
    // Written first by the backward of the last reader (every reader that writes it has a
    // backward), read by the producer's backward.
    int first_write = -1;
    for (const auto& w : v.writers) first_write = std::max(first_write, w.first);
    if (v.loss_writes || first_write < 0) return false;
    first = backward_step(plan, first_write);
    last = producer_backward ? std::max(first, backward_step(plan, producer)) : first;
    return true;
}

dnnl::memory unplanned_memory(NetworkPlan& plan, const dnnl::engine& engine, const dnnl::memory::desc& desc) {
    plan.unplanned_bytes += BufferPlan::aligned(desc.get_size());
    return dnnl::memory(desc, engine);
}

dnnl::memory planned_memory(NetworkPlan& plan, const dnnl::engine& engine, const dnnl::memory::desc& desc, int first,
                            int last) {
    const std::size_t bytes = desc.get_size();
    if (!plan.arena || bytes == 0) return unplanned_memory(plan, engine, desc);
    const std::size_t id = plan.buffers.place(bytes, first, last);
    const auto& b = plan.buffers.buffer(id);
    if (!plan.arena->grow(b.offset + BufferPlan::aligned(bytes))) {
        plan.plan_failed = true;
        throw std::runtime_error("buffer plan: the arena's address space is exhausted");
    }
    return dnnl::memory(desc, engine, plan.arena->base() + b.offset);
}

std::optional<dnnl::memory> in_place_memory(NetworkPlan& plan, const dnnl::engine& engine, int k, std::size_t slot,
                                            ValueState& out, const dnnl::memory::desc& desc) {
    const KernelState& kernel = plan.kernels.at(static_cast<std::size_t>(k));
    if (!plan.arena || kernel.in_place != static_cast<int>(slot) || slot >= kernel.inputs.size() || out.kept)
        return std::nullopt;
    const int value = kernel.inputs[slot];
    for (std::size_t s = 0; s < kernel.inputs.size(); ++s)
        if (s != slot && kernel.inputs[s] == value) return std::nullopt;
    const ValueState& in = plan.values.at(static_cast<std::size_t>(value));
    const int here = forward_step(k);
    if (in.kept || in.tensor != nullptr || in.last != here || !in.mem || in.mem.get_desc() != desc) return std::nullopt;
    char* at = static_cast<char*>(in.mem.get_data_handle());
    char* base = plan.arena->base();
    if (at < base || at >= base + plan.arena->reserved()) return std::nullopt;  // not planned: an input
    const std::size_t id = plan.buffers.find(static_cast<std::size_t>(at - base), here);
    // The input's own buffer, held for this output (the input's placed_last()) and by no other value.
    if (id == BufferPlan::kNone || id != in.own_buffer || plan.buffers.buffer(id).last != in.placed_last())
        return std::nullopt;
    if (!plan.buffers.extend(id, std::max(here, out.placed_last()))) return std::nullopt;
    plan.in_place_bytes += BufferPlan::aligned(desc.get_size());
    out.own_buffer = id;
    return dnnl::memory(desc, engine, at);
}

bool poison_requested() {
    const char* env = std::getenv("PSRUN_POISON_FREED");
    return env != nullptr && std::string(env) == "1";
}

bool declared_reads_off() {
    const char* env = std::getenv("PSRUN_BACKWARD_READS");
    return env != nullptr && std::string(env) == "all";
}

void plan_poison(NetworkPlan& plan) {
    plan.poison_after.clear();
    if (!plan.arena) return;
    plan.poison_after.resize(2 * plan.kernels.size() + 1);
    for (std::size_t id = 0; id < plan.buffers.size(); ++id) {
        const auto& b = plan.buffers.buffer(id);
        if (b.last < 0 || static_cast<std::size_t>(b.last) >= plan.poison_after.size()) continue;  // kForever
        plan.poison_after[static_cast<std::size_t>(b.last)].emplace_back(plan.arena->base() + b.offset, b.bytes);
    }
}

void poison_step(const NetworkPlan& plan, int step) {
    if (step < 0 || static_cast<std::size_t>(step) >= plan.poison_after.size()) return;
    for (const auto& [at, bytes] : plan.poison_after[static_cast<std::size_t>(step)]) std::memset(at, 0xFF, bytes);
}

}  // namespace psrun::nn
