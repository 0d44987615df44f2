// The Network's inside (network.h): every value of the graph with its memories, every kernel
// with its recorded work, and how gradients are routed. Built by network_build.cpp, run by
// network.cpp. Internal to the engine.
#pragma once

#include <cstddef>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "workerd/nn/arena.h"
#include "workerd/nn/buffer_plan.h"
#include "workerd/nn/kernel.h"

namespace psrun::nn {

struct ValueState {
    std::string name;
    ValueInfo info;
    dnnl::memory::dims dims;  // at the network's batch size
    dnnl::memory mem;         // as its producer made it
    dnnl::memory diff;        // dL/d(value), the producer's desc; empty unless needs_grad
    bool needs_grad = false;  // depends on a trainable tensor and reaches the loss
    const TensorDef* tensor = nullptr;
    int producer = -1;  // kernel index; -1: the input or a tensor
    // Who writes `diff`: (kernel, input slot) in forward order; the model output's diff is
    // written first by the loss.
    std::vector<std::pair<int, std::size_t>> writers;
    bool loss_writes = false;
    std::vector<dnnl::memory> conversions;  // forward copies in other formats, shared by consumers
    // Buffer planning (buffer_plan.h, steps numbered as in network_build.cpp): the last step that
    // reads the value (its readers' forward, or backward where they have one) and the last step
    // its memory must hold it (that, and its producer's backward).
    int last_read = 0;
    int last = 0;
    // An output chosen to be written over this value (KernelState::in_place) lives until `hold`:
    // the buffer is placed live that long.
    int hold = -1;
    int placed_last() const { return last > hold ? last : hold; }
    // The planned buffer its producer placed for it alone (make_output, or in place over an
    // input's own buffer); BufferPlan::kNone for a view, a conversion or an unplanned memory.
    std::size_t own_buffer = BufferPlan::kNone;
    bool kept = false;  // read after the step (the model output, the heads): never planned
    // The gradient buffer it shares (NetworkPlan::grad_groups, buffer_lifetimes.h
    // share_gradients); -1: one of its own.
    int grad_group = -1;
};

// Gradients that one planned buffer holds in turn (buffer_lifetimes.h share_gradients): an
// add's output gradient and the input gradients its backward copies it into. The buffer is
// placed for [first, last] by the member whose producer builds first; a member whose desc
// differs from that placed one gets a buffer of its own (and, learned by a first build, is left
// out of the group in the build after: BuildLessons::unshared).
struct GradientGroup {
    int first = 0;
    int last = 0;
    std::vector<std::pair<int, int>> members;  // (value, the last step its gradient is read)
    dnnl::memory mem;                          // once placed
};

struct KernelState {
    std::vector<const Node*> nodes;
    std::size_t first_node = 0;  // index of nodes.front() in the model
    std::vector<int> inputs;     // value indices
    std::vector<int> outputs;
    std::unique_ptr<Kernel> kernel;
    BackwardReads reads;  // kernel->backward_reads(nodes), before any kernel builds
    int in_place = -1;    // the input slot output 0 is written over (reads.in_place or in_place_else)
    std::string label;    // "conv2d+relu"
    bool reaches_loss = false;
    bool backward = false;
    // Bit i: input_as() returned a conversion (not the value's own memory) for input slot i, in
    // the build before this one (`converted_before`, BuildLessons::converted) and in this one.
    std::uint64_t converted_before = 0;
    std::uint64_t converted = 0;
    // Whether the backward reads slot i through a conversion known from the build before: the
    // value need not live until this backward (BackwardReads::as_converted).
    bool reads_through_conversion(std::size_t i) const {
        return backward && reads.reads_converted(i) && ((converted_before >> i) & 1u) != 0;
    }
    std::vector<Op> fwd, bwd_pre, bwd, bwd_post;
    std::vector<std::string> impls;
};

// What a first build of a network learns that only the kernels' builds can tell (Network::build
// moves it from one NetworkPlan to the next and builds again where it matters).
struct BuildLessons {
    bool known = false;  // learned: the build is not the first
    // Per kernel, KernelState::converted: which input slots were read through a conversion.
    // Where a backward reads an input only as converted (BackwardReads::as_converted), the
    // network is built again knowing them, so that the value itself dies at its last forward read.
    std::vector<std::uint64_t> converted;
    // Values found with a gradient desc other than their group's first member's (a plain
    // transpose's gradient in the group of a blocked add's): share_gradients leaves them out, so
    // that no group buffer is placed for a member that cannot use it.
    std::vector<int> unshared;
    // Per value, the desc its gradient's first writer gave input_diff() where the gradient had
    // another (a convolution's blocked diff_src of a plain value): grad_candidates. Made in that
    // desc, the writer writes it directly and the producer's backward converts it where it wants
    // another (output_diff): a temporary moved from one step to another, or none where the
    // producer wants that desc too. Whether that needs fewer bytes depends on the network, so a
    // build tries it (grad_trial 1: grad_descs = the candidates) after a build without (whose
    // bytes it keeps), and the lesser stays (grad_trial 2). Values in a gradient group are left
    // as they are.
    std::map<int, dnnl::memory::desc> grad_candidates;
    std::map<int, dnnl::memory::desc> grad_descs;
    int grad_trial = 0;
    std::size_t bytes_without_grad_descs = 0;
};

struct NetworkPlan {
    std::vector<ValueState> values;
    std::map<std::string, int, std::less<>> value_index;
    std::vector<KernelState> kernels;
    // Memories over the gradient buffer (tensor gradients, state deltas) and their offsets:
    // set_gradient_buffer re-points them.
    std::vector<std::pair<dnnl::memory, std::size_t>> grad_memories;
    // Trainable tensors no path to the loss reaches: zeroed every step.
    std::vector<std::pair<std::size_t, std::size_t>> dead_grads;  // (offset, size) in floats
    int output = -1;                                              // the model output's value
    float* grads = nullptr;
    // Planned buffers (NetworkOptions::plan_buffers): their offsets in `arena`; null arena when
    // planning is off. unplanned_bytes: the engine's buffers outside the arena (the model
    // output and its gradient, the head, a zero gradient for an output nobody reads; every
    // buffer when planning is off). plan_failed: a view outlived its buffer's plan (build fails,
    // Network::create builds again without planning).
    std::unique_ptr<Arena> arena;
    BufferPlan buffers;
    std::size_t unplanned_bytes = 0;
    // Outputs written over an input (BackwardReads::in_place): bytes a buffer each would add.
    std::size_t in_place_bytes = 0;
    std::vector<GradientGroup> grad_groups;
    // Gradients held in a group's buffer instead of one of their own: bytes a buffer each would add.
    std::size_t shared_grad_bytes = 0;
    bool plan_failed = false;
    // Set by a build whose buffers, placed again with all of them known (BufferPlan::
    // offline_offsets), need fewer bytes: the next build (Network::build, again) places there.
    // online_only: a build with those offsets failed; the next places as buffers come.
    std::vector<std::size_t> offline_offsets;
    bool online_only = false;
    // What the first build learned, carried to every build after it (Network::build).
    BuildLessons lessons;
    // Debug (PSRUN_POISON_FREED=1, buffer_lifetimes.h): per step, the planned byte ranges whose
    // lifetime ends there, filled with 0xFF bytes (NaN) after it; empty when off.
    std::vector<std::vector<std::pair<char*, std::size_t>>> poison_after;
};

// A memory of `desc` filled with zeros (a gradient nobody writes), outside any plan.
dnnl::memory zeroed_memory(const dnnl::memory::desc& desc, const dnnl::engine& engine);
// Appends to `ops` a reorder of `from` into `to`; `accumulate`: added to what `to` holds.
void add_reorder(std::vector<Op>& ops, const dnnl::stream& stream, const dnnl::memory& from, const dnnl::memory& to,
                 bool accumulate);

// Gradient routing (gradient_routing.cpp). Backward runs the kernels last to first, and the writes
// of one kernel's input gradients run in the order the kernel asked for them (input_diff), not
// in slot order. The first write of a value's gradient overwrites it; every later one adds.
// True when kernel `kernel` asking now for the gradient of value `value` (`v`) is that first
// write; `asked`: the values this kernel asked for before, in order.
bool overwrites_gradient(const ValueState& v, int value, int kernel, const std::vector<int>& asked);
// After kernel `k` built itself: "" when it asked for the gradient of every input slot that
// needs one (`asked[slot]`), else an error naming the kernel and the first input it left out
// (whose gradient would otherwise add up, stale, step after step).
std::string unasked_gradients(const NetworkPlan& plan, const KernelState& k, const std::vector<bool>& asked);

}  // namespace psrun::nn
