// Gradient routing (network_plan.h): the first write of a value's gradient, the inputs a
// kernel left without one, and the copies, sums and zero gradients the Network adds.
#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include "workerd/nn/network_plan.h"

namespace psrun::nn {

using dnnl::memory;

memory zeroed_memory(const memory::desc& desc, const dnnl::engine& engine) {
    memory m(desc, engine);
    std::memset(m.get_data_handle(), 0, desc.get_size());
    return m;
}

void add_reorder(std::vector<Op>& ops, const dnnl::stream& stream, const memory& from, const memory& to,
                 bool accumulate) {
    dnnl::primitive_attr attr;
    if (accumulate) {
        dnnl::post_ops po;
        po.append_sum(1.0f);
        attr.set_post_ops(po);
    }
    dnnl::reorder r(dnnl::reorder::primitive_desc(from, to, attr));
    ops.push_back([r, stream, from, to]() mutable { r.execute(stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, to}}); });
}

bool overwrites_gradient(const ValueState& v, int value, int kernel, const std::vector<int>& asked) {
    if (v.loss_writes) return false;
    for (const auto& w : v.writers)
        if (w.first > kernel) return false;  // a later kernel's backward ran before this one's
    return std::find(asked.begin(), asked.end(), value) == asked.end();
}

std::string unasked_gradients(const NetworkPlan& plan, const KernelState& k, const std::vector<bool>& asked) {
    if (!k.backward || !k.reaches_loss) return "";
    for (std::size_t i = 0; i < k.inputs.size(); ++i) {
        const ValueState& v = plan.values.at(static_cast<std::size_t>(k.inputs[i]));
        if (v.needs_grad && !(i < asked.size() && asked[i]))
            return "kernel " + k.label + " never asked for the gradient of input " + std::to_string(i) + " ('" +
                   v.name + "'), which needs one: its build must call input_diff(" + std::to_string(i) + ")";
    }
    return "";
}

}  // namespace psrun::nn
