#include "workerd/nn/buffer_lifetimes.h"

#include <algorithm>
#include <stdexcept>

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
        const int k_last = k.backward ? backward_step(plan, static_cast<int>(ki)) : forward_step(static_cast<int>(ki));
        for (const auto i : k.inputs) {
            auto& v = plan.values[static_cast<std::size_t>(i)];
            v.last_read = std::max(v.last_read, k_last);
        }
        for (const auto o : k.outputs) {
            auto& v = plan.values[static_cast<std::size_t>(o)];
            v.last = std::max(v.last, k_last);
        }
    }
    for (auto& v : plan.values) v.last = std::max(v.last, v.last_read);
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

}  // namespace psrun::nn
