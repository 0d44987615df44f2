#include "workerd/nn/fusion.h"

#include <stdexcept>

#include "workerd/nn/kernels/conv1_pool.h"
#include "workerd/nn/kernels/max_pool.h"
#include "workerd/nn/ops/conv.h"
#include "workerd/nn/ops/ops.h"
#include "workerd/nn/ops/pool.h"

namespace psrun::nn {

namespace {

// nodes[i + 1] is the only reader of nodes[i]'s single output, which is not the model output nor a head.
bool only_reader_is_next(const FusionQuery& q, std::size_t i) {
    const auto& nodes = q.model.nodes;
    if (i + 1 >= nodes.size() || nodes[i].outputs.size() != 1) return false;
    const std::string& v = nodes[i].outputs[0];
    if (v == q.model.output || q.model.head_index(v) >= 0) return false;  // read after the step
    const auto& readers = q.readers(v);
    return readers.size() == 1 && readers[0] == i + 1 && nodes[i + 1].inputs.size() == 1;
}

// conv2d + batch_norm over its output, every tensor of both a tensor (not a computed value).
bool conv_batch_norm(const FusionQuery& q, std::size_t i) {
    const auto& nodes = q.model.nodes;
    if (nodes[i].op != "conv2d" || i + 1 >= nodes.size() || nodes[i + 1].op != "batch_norm" ||
        nodes[i].outputs.size() != 1 || nodes[i].outputs[0] == q.model.output ||
        q.model.head_index(nodes[i].outputs[0]) >= 0 || nodes[i + 1].data_inputs != 1)
        return false;
    const auto& readers = q.readers(nodes[i].outputs[0]);
    if (readers.size() != 1 || readers[0] != i + 1 || nodes[i + 1].inputs[0] != nodes[i].outputs[0]) return false;
    for (const std::size_t n : {i, i + 1})
        for (std::size_t k = nodes[n].data_inputs; k < nodes[n].inputs.size(); ++k)
            if (q.model.tensor(nodes[n].inputs[k]) == nullptr) return false;
    return true;
}

// add or sub of two values of the output's shape (no broadcasting).
bool same_shape_add(const FusionQuery& q, const Node& n) {
    if ((n.op != "add" && n.op != "sub") || n.inputs.size() != 2) return false;
    const auto& out = n.output_info.at(0).dims;
    return q.model.value(n.inputs[0]).dims == out && q.model.value(n.inputs[1]).dims == out;
}

bool is_pool_2x2_stride_2(const FusionQuery& q, const Node& p) {
    if (p.op != "max_pool") return false;
    auto g = pool_geometry(p, q.model.value(p.inputs[0]));
    if (!g) return false;
    const Window2d& w = g->window;
    return w.kh == 2 && w.kw == 2 && w.sh == 2 && w.sw == 2 && w.dh == 1 && w.dw == 1 && w.pt == 0 && w.pb == 0 &&
           w.pl == 0 && w.pr == 0;
}

// conv2d + relu + max_pool 2x2/2 from node i, the conv's geometry in g.
bool conv_relu_pool(const FusionQuery& q, std::size_t i, ConvGeometry& g) {
    const auto& nodes = q.model.nodes;
    if (nodes[i].op != "conv2d" || !only_reader_is_next(q, i) || nodes[i + 1].op != "relu" ||
        !only_reader_is_next(q, i + 1) || !is_pool_2x2_stride_2(q, nodes[i + 2]))
        return false;
    auto geometry = conv_geometry(nodes[i].attrs, q.model.value(nodes[i].inputs[0]));
    if (!geometry || geometry->spatial != 2) return false;  // the hand kernels are 2-D
    g = *geometry;
    return true;
}

bool fused_conv1_pool(const FusionQuery& q, std::size_t i) {
    ConvGeometry g;
    if (!conv_relu_pool(q, i, g)) return false;
    const Node& c = q.model.nodes[i];
    const Window2d& w = g.window;
    const auto k = w.kh, half = k / 2;
    const ValueInfo& in = q.model.value(c.inputs[0]);
    if (g.in_channels != 1 || g.groups != 1 || w.kw != k || w.sh != 1 || w.sw != 1 || w.dh != 1 || w.dw != 1 ||
        !g.bias || w.pt != half || w.pb != half || w.pl != half || w.pr != half || w.oh != in.dims[2].value ||
        w.ow != in.dims[3].value)
        return false;
    // The kernel computes no gradient w.r.t. its input, and reads the tensors in place.
    if (q.context.training && q.needs_grad(c.inputs[0])) return false;
    if (q.model.tensor(c.inputs[1]) == nullptr || q.model.tensor(c.inputs[2]) == nullptr) return false;
    return kernels::FusedConv1Pool::supported(static_cast<int>(w.oh), static_cast<int>(w.ow),
                                              static_cast<int>(g.filters), static_cast<int>(k));
}

bool conv_relu_blocked_pool(const FusionQuery& q, std::size_t i) {
    ConvGeometry g;
    if (q.context.precision != Precision::kF32 || !conv_relu_pool(q, i, g)) return false;
    return kernels::BlockedMaxPool::supported(static_cast<int>(g.filters), static_cast<int>(g.window.oh),
                                              static_cast<int>(g.window.ow));
}

}  // namespace

std::vector<KernelGroup> plan_kernels(const FusionQuery& q) {
    const auto& nodes = q.model.nodes;
    std::vector<KernelGroup> groups;
    for (std::size_t i = 0; i < nodes.size();) {
        KernelGroup g;
        if (q.hand_kernels && fused_conv1_pool(q, i)) {
            g.nodes = {i, i + 1, i + 2};
            g.kernel = make_fused_conv_relu_pool_kernel();
        } else if (q.hand_kernels && conv_relu_blocked_pool(q, i)) {
            g.nodes = {i, i + 1, i + 2};
            g.kernel = make_conv_relu_blocked_pool_kernel();
        } else if (!q.context.training && conv_batch_norm(q, i)) {
            g.nodes = {i, i + 1};
            if (only_reader_is_next(q, i + 1) && (nodes[i + 2].op == "relu" || nodes[i + 2].op == "clip"))
                g.nodes.push_back(i + 2);
            g.kernel = make_conv_bn_kernel();
        } else if ((nodes[i].op == "conv2d" || nodes[i].op == "dense" || nodes[i].op == "batch_norm" ||
                    same_shape_add(q, nodes[i])) &&
                   only_reader_is_next(q, i) && nodes[i + 1].op == "relu") {
            g.nodes = {i, i + 1};
            g.kernel = make_kernel(nodes[i].op);
        } else {
            g.nodes = {i};
            g.kernel = make_kernel(nodes[i].op);
        }
        if (!g.kernel)
            throw std::runtime_error("layer " + std::to_string(i) + " (" + nodes[i].op + " \"" + nodes[i].name +
                                     "\"): the engine has no kernel for kind " + nodes[i].op);
        i += g.nodes.size();
        groups.push_back(std::move(g));
    }
    return groups;
}

}  // namespace psrun::nn
