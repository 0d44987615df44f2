// First-order optimizers that update a float span in place. Used by psd on its shard and
// by workerd in standalone mode. Each Optimizer owns the slot state for exactly one span.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/lr_schedule.h"
#include "common/result.h"

namespace psrun {

enum class OptimizerKind : std::uint8_t { kSgd = 0, kMomentum = 1, kAdagrad = 2, kAdam = 3 };

struct OptimizerConfig {
    OptimizerKind kind = OptimizerKind::kAdam;
    float learning_rate = 1e-4f;
    float momentum = 0.9f;           // kMomentum
    float beta1 = 0.9f;              // kAdam
    float beta2 = 0.999f;            // kAdam
    float epsilon = 1e-8f;           // kAdam (TF's "epsilon hat"), kAdagrad uses none
    float adagrad_initial = 0.1f;    // kAdagrad accumulator start value (TF default)
    // Learning-rate decay as TF 1.x's tf.train.exponential_decay (staircase false): the update
    // numbered t (1-based, Adam's t) uses learning_rate * decay_rate ^ ((t - 1) / decay_steps).
    // decay_steps 0: constant rate. REQUIRES: 0 < decay_rate <= 1. Applies only while `schedule`
    // is constant (it is --lr-decay-rate/--lr-decay-steps, the shorthand of an exponential schedule).
    float decay_rate = 1.0f;
    std::uint64_t decay_steps = 0;
    // --lr-schedule and --lr-warmup-steps (common/lr_schedule.h), over learning_rate.
    LrSchedule schedule = {};
    // The schedule rate_at() follows: `schedule`, or the exponential of decay_rate/decay_steps
    // (with the schedule's warm-up) when `schedule` is constant. Used in logs and summaries.
    LrSchedule effective_schedule() const;
    // The learning rate of update number t (t >= 1).
    float rate_at(std::uint64_t t) const;
};

[[nodiscard]] Result<OptimizerKind> parse_optimizer_kind(std::string_view name);
std::string_view to_string(OptimizerKind kind);
// Number of slot vectors the kind keeps per parameter (0, 1 or 2).
int slot_count(OptimizerKind kind);

// The element-wise update of update number t (>= 1) over n contiguous floats with their slots,
// exactly as Optimizer::apply_range computes it: the dense optimizer and psd's sparse rows
// (psd/row_store.h) share it, so that a row updated sparsely moves exactly as the same row of a
// dense tensor with the same gradient. Slot pointers are null where the kind keeps none.
class UpdateKernel {
public:
    UpdateKernel(const OptimizerConfig& config, std::uint64_t t);
    void operator()(float* params, const float* grads, float* slot0, float* slot1, std::size_t n) const;

private:
    OptimizerKind kind_;
    float lr_;      // the schedule's rate of update t
    float lr_t_;    // Adam: lr * sqrt(1 - beta2^t) / (1 - beta1^t)
    float momentum_, beta1_, beta2_, epsilon_;
};

// Updates follow TensorFlow 1.x's GradientDescent, Momentum (non-Nesterov), Adagrad and Adam
// kernels, so that results match the reference recipes. Not thread-safe: one caller at a time.
class Optimizer {
public:
    Optimizer(const OptimizerConfig& config, std::size_t size);

    // params -= update(grads). REQUIRES: params.size() == grads.size() == size().
    void apply(std::span<float> params, std::span<const float> grads);

    // The same update split across threads: call begin_update() once (it counts the update),
    // then apply_range() over disjoint [begin, end) ranges that together cover [0, size()), from
    // any threads, before the next begin_update(). params and grads are the whole spans.
    void begin_update() { ++updates_; }
    void apply_range(std::span<float> params, std::span<const float> grads, std::size_t begin, std::size_t end);

    std::size_t size() const { return size_; }
    const OptimizerConfig& config() const { return config_; }
    // Number of apply() calls so far (Adam's t). Restored from checkpoints.
    std::uint64_t updates() const { return updates_; }
    void set_updates(std::uint64_t updates) { updates_ = updates; }

    // Slot vectors in a fixed order (momentum: {accum}; adagrad: {accum}; adam: {m, v}),
    // each size() floats. The spans stay valid for the optimizer's lifetime.
    std::vector<std::span<float>> slots();

private:
    OptimizerConfig config_;
    std::size_t size_;
    std::uint64_t updates_ = 0;
    std::vector<float> slot0_;
    std::vector<float> slot1_;
};

// The update of a state tensor (common/tensor_layout.h TensorClass::kState): params -= delta
// over [begin, end), with no optimizer, slots, learning rate or schedule. The spans are whole
// tensors (or slices); REQUIRES begin <= end <= params.size() == delta.size().
void subtract_range(std::span<float> params, std::span<const float> delta, std::size_t begin, std::size_t end);

}  // namespace psrun
