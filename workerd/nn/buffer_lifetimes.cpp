#include "workerd/nn/buffer_lifetimes.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
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
            v.last_read = std::max(v.last_read, k.reads.reads_input(s) ? bwd : fwd);
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
        const int slot = k.reads.in_place;
        if (slot < 0 || static_cast<std::size_t>(slot) >= k.inputs.size() || k.outputs.empty()) continue;
        const int value = k.inputs[static_cast<std::size_t>(slot)];
        if (std::count(k.inputs.begin(), k.inputs.end(), value) != 1) continue;
        auto& in = plan.values[static_cast<std::size_t>(value)];
        const auto& out = plan.values[static_cast<std::size_t>(k.outputs.front())];
        if (in.producer < 0 || in.kept || out.kept || in.last != forward_step(static_cast<int>(ki))) continue;
        k.in_place = true;
        in.hold = std::max(in.hold, out.placed_last());
    }
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
    if (!plan.arena || !kernel.in_place || slot >= kernel.inputs.size() || out.kept) return std::nullopt;
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
