// Lifetimes of the engine's buffers over one training step (buffer_plan.h), for
// network_build.cpp: how steps are numbered, which kernels write each value's gradient, the
// last step each value is read, and the planned memories placed by those lifetimes.
//
// Steps: the forward of kernel k is step k, the loss is step K (the number of kernels), the
// backward of kernel k is step 2K - k. A value lives from its producer's forward to the last
// step that reads it. Internal to the engine; not thread-safe.
#pragma once

#include <cstddef>
#include <optional>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "workerd/nn/network_plan.h"

namespace psrun::nn {

inline int forward_step(int k) { return k; }
inline int backward_step(const NetworkPlan& plan, int k) { return 2 * static_cast<int>(plan.kernels.size()) - k; }

// After the kernels are in plan.kernels (inputs, outputs, backward set) and the values'
// needs_grad: each value's producer and the kernels whose backward writes its gradient
// (ValueState::writers); the model output's gradient is written by the loss when training.
void link_values(NetworkPlan& plan, bool training);

// Each value's last_read and last (ValueState), from each kernel's BackwardReads (kernel.h,
// KernelState::reads), as PyTorch's autograd keeps a tensor: a value is read by its readers'
// forward, and by the backward of those that declare they read that input slot; its
// producer's backward reads it when the producer declares it reads its outputs; a view's input
// (BackwardReads::view) lives as long as the view.
void compute_lifetimes(NetworkPlan& plan);

// After compute_lifetimes: the gradients one buffer can hold in turn (NetworkPlan::grad_groups,
// ValueState::grad_group), as autograd hands one tensor on. An add's backward (binary_kernel.cpp:
// add, or sub's first input, with equal shapes, a fused relu's backward applied in place to dC
// first) copies its output's gradient unchanged into its inputs': each input whose gradient that
// backward writes first (the other writers add to it after) can hold it in the same buffer, as
// long as every gradient the buffer held before ended before that step, and two inputs' share
// only where one's is read for the last time before the other's is changed (by a later writer,
// or by its producer's backward, which may work on it in place). Chains form along residual
// streams: the input's gradient becomes the next add's output gradient. Off with
// PSRUN_BACKWARD_READS=all. The kernel needs no declaration: where the memories are the same,
// its copy is skipped. A backward that writes one input's gradient over its output's, element
// by element (BackwardReads::grad_over_output: an eltwise backward, where's), joins that one
// input's gradient to the group the same way. Leaves out the values in plan.lessons.unshared.
void share_gradients(NetworkPlan& plan);

// The last step a conversion of `value` made at kernel `from`'s forward must hold: the reads of
// kernels from `from` on (their forward, their backward where it reads the value, the life of
// a view of it), the only ones that can share it.
int conversion_last(const NetworkPlan& plan, int value, int from);

// After a build: the group members whose gradient's desc differs from their group's first
// member's (each got a buffer of its own; BuildLessons::unshared), in value order.
std::vector<int> unshared_gradients(const NetworkPlan& plan);

// Debug mode (the environment variable PSRUN_POISON_FREED=1, planned networks only): after
// build, plan.poison_after lists each planned buffer under the step its lifetime ends; the
// Network fills those bytes with 0xFF (NaN in f32 and bf16) right after that step's work, so a
// kernel that reads a buffer past its lifetime (a BackwardReads declaring too little) computes
// NaN or garbage, where without planning it would not.
bool poison_requested();
// Measurements (PSRUN_BACKWARD_READS=all): every kernel treated as reading all its inputs and
// outputs in backward, nothing in place: the lifetimes before the kernels declared theirs.
bool declared_reads_off();
void plan_poison(NetworkPlan& plan);
// Fills the buffers whose lifetime ends at `step` (no-op when poison_after is empty).
void poison_step(const NetworkPlan& plan, int step);

// The steps [first, last] the gradient of value `v` (produced by kernel `producer`, whose
// backward runs when `producer_backward`) lives: from the backward of its last writer (the
// first to run) to its producer's backward. False when it has no writer kernel (the loss
// writes it, or nobody does): it is not planned.
bool gradient_steps(const NetworkPlan& plan, const ValueState& v, int producer, bool producer_backward, int& first,
                    int& last);

// A memory of `desc` outside the arena (counted in plan.unplanned_bytes).
dnnl::memory unplanned_memory(NetworkPlan& plan, const dnnl::engine& engine, const dnnl::memory::desc& desc);
// A memory of `desc` placed in the arena live over steps [first, last], or one of its own when
// planning is off (no arena) or it is empty. Throws std::runtime_error (and sets
// plan.plan_failed) when the arena's address space is exhausted.
dnnl::memory planned_memory(NetworkPlan& plan, const dnnl::engine& engine, const dnnl::memory::desc& desc, int first,
                            int last);

// Output 0 of kernel `k` (the value `out`) over the memory of its input slot `slot`
// (BackwardReads::in_place or in_place_else), when that is safe: compute_lifetimes chose that
// slot (KernelState::in_place: the input has the output's dims and type, dies at k's forward and
// no other slot of k reads it), planning is on,
// the input's memory is its own buffer (ValueState::own_buffer), held by no other value, with
// `desc`. Sets out.own_buffer. nullopt otherwise (the caller makes a buffer of its own).
std::optional<dnnl::memory> in_place_memory(NetworkPlan& plan, const dnnl::engine& engine, int k, std::size_t slot,
                                            ValueState& out, const dnnl::memory::desc& desc);

}  // namespace psrun::nn
