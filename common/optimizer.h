// First-order optimizers that update a float span in place. Used by psd on its shard and
// by workerd in standalone mode. Each Optimizer owns the slot state for exactly one span.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/lamb.h"
#include "common/lr_schedule.h"
#include "common/result.h"

namespace psrun {

// kAdam is TF 1.x's Adam ("epsilon hat": lr_t = lr * sqrt(1 - b2^t) / (1 - b1^t), p -= lr_t * m /
// (sqrt(v) + eps)); kAdamTorch is torch.optim.Adam's (p -= lr / (1 - b1^t) * m / (sqrt(v) /
// sqrt(1 - b2^t) + eps)); kAdamW is torch.optim.AdamW (p *= 1 - lr * weight_decay, then kAdamTorch);
// kNesterov is torch.optim.SGD(momentum, nesterov=True, dampening 0), which is also TF's
// MomentumOptimizer(use_nesterov=True). kLamb is LAMB (common/lamb.h: per-tensor trust ratio, so
// not element-wise; its two-phase update is Optimizer::lamb_moments/lamb_finish/lamb_step).
enum class OptimizerKind : std::uint8_t {
    kSgd = 0,
    kMomentum = 1,
    kAdagrad = 2,
    kAdam = 3,
    kNesterov = 4,
    kAdamTorch = 5,
    kAdamW = 6,
    kLamb = 7
};
inline constexpr std::uint8_t kMaxOptimizerKind = 7;

// Which trainable tensors --weight-decay applies to: kMatrices, those of rank >= 2 (conv and
// linear weights, embedding tables; never biases or normalization scales and shifts), or kAll.
// State tensors (TensorClass::kState) never decay.
enum class WeightDecayOn : std::uint8_t { kMatrices = 0, kAll = 1 };
[[nodiscard]] Result<WeightDecayOn> parse_weight_decay_on(std::string_view name);
std::string_view to_string(WeightDecayOn on);

// --param-group PATTERN:lr_mult=M,weight_decay=W (common/param_groups.h): the tensors whose name
// matches the glob PATTERN (fnmatch, '*' also crosses '/') are updated with learning rate x M and,
// when weight_decay is given, decay W whatever their rank (replacing weight_decay and
// weight_decay_on for them), as a torch.optim parameter group. The first matching group wins.
struct ParamGroup {
    std::string pattern;
    float lr_multiplier = 1.0f;  // finite, >= 0 (0 freezes the tensors)
    bool sets_weight_decay = false;
    float weight_decay = 0.0f;  // finite, >= 0; read when sets_weight_decay
    bool matches(std::string_view tensor_name) const;
    bool operator==(const ParamGroup&) const = default;
};

struct OptimizerConfig {
    OptimizerKind kind = OptimizerKind::kAdam;
    float learning_rate = 1e-4f;
    float momentum = 0.9f;         // kMomentum, kNesterov (uses_momentum); [0, 1)
    float beta1 = 0.9f;            // the Adam forms (uses_betas); [0, 1)
    float beta2 = 0.999f;          // the Adam forms; [0, 1)
    float epsilon = 1e-8f;         // the Adam forms (kAdam: TF's "epsilon hat"); > 0. kAdagrad uses none
    float adagrad_initial = 0.1f;  // kAdagrad accumulator start value (TF default)
    // L2 weight decay of the tensors weight_decay_on selects (decays()). Coupled (torch's SGD and
    // Adam weight_decay: g += weight_decay * p before the update) for every kind but kAdamW, where
    // it is decoupled (p *= 1 - lr * weight_decay), and kLamb, where weight_decay * p is added to the
    // Adam direction before the trust ratio (common/lamb.h). REQUIRES: finite, >= 0.
    float weight_decay = 0.0f;
    WeightDecayOn weight_decay_on = WeightDecayOn::kMatrices;
    // --clip-global-norm: the worker scales its whole gradient by min(1, C / ||g||) before sending
    // it (or before its local update); 0: off. Carried here to be recorded; no kernel reads it.
    float clip_global_norm = 0.0f;
    // --ema-decay: psd keeps an exponential moving average of the dense parameters with this
    // decay (psd/weight_average.h), saved in checkpoints for eval, predict and export --ema.
    // 0: off. REQUIRES: 0 <= ema_decay < 1. No kernel reads it.
    float ema_decay = 0.0f;
    // The update's learning rate is rate_at(t) x lr_multiplier (a parameter group's; 1 otherwise).
    float lr_multiplier = 1.0f;
    // --param-group: per-tensor learning-rate multipliers and weight decay (for_tensor()).
    std::vector<ParamGroup> groups = {};
    // The configuration tensor `name` of rank `rank` is updated with: the first group matching the
    // name sets lr_multiplier (and weight_decay); weight decay is resolved to the value the tensor
    // gets (0 when it does not decay) with weight_decay_on kAll, so decays() of the result is
    // weight_decay > 0 for any rank. No groups in the result.
    OptimizerConfig for_tensor(std::string_view name, std::size_t rank) const;
    // Whether a trainable tensor of this rank decays (weight_decay > 0 and weight_decay_on).
    bool decays(std::size_t rank) const {
        return weight_decay > 0.0f && (weight_decay_on == WeightDecayOn::kAll || rank >= 2);
    }
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
// Whose update rule the kind computes, as summary.json records it: "tf1" (sgd, momentum, adagrad),
// "tf1 epsilon-hat" (adam), "torch" (nesterov, adam_torch, adamw; nesterov is also TF 1.x's),
// "lamb (You et al.)" (lamb, as apex FusedLAMB and timm's Lamb compute it: common/lamb.h).
std::string_view optimizer_form(OptimizerKind kind);
// Number of slot vectors the kind keeps per parameter (0, 1 or 2).
int slot_count(OptimizerKind kind);
// Whether the kind's update reads OptimizerConfig::momentum (momentum, nesterov), and beta1,
// beta2 and epsilon (adam, adam_torch, adamw, lamb).
bool uses_momentum(OptimizerKind kind);
bool uses_betas(OptimizerKind kind);

// The element-wise update of update number t (>= 1) over n contiguous floats with their slots,
// exactly as Optimizer::apply_range computes it: the dense optimizer and psd's sparse rows
// (psd/row_store.h) share it, so that a row updated sparsely moves exactly as the same row of a
// dense tensor with the same gradient. Slot pointers are null where the kind keeps none.
// `decay`: the floats belong to a tensor that decays (OptimizerConfig::decays); the config's
// weight_decay is applied only then. kLamb is not element-wise: one call's n floats are one whole
// tensor, the unit of its trust ratio (LambKernel::whole; psd's sparse rows: one row).
class UpdateKernel {
  public:
    UpdateKernel(const OptimizerConfig& config, std::uint64_t t, bool decay);
    void operator()(float* params, const float* grads, float* slot0, float* slot1, std::size_t n) const;

  private:
    template <bool kCoupled>
    void update(float* params, const float* grads, float* slot0, float* slot1, std::size_t n) const;
    OptimizerKind kind_;
    float lr_;               // the schedule's rate of update t
    float lr_t_;             // kAdam: lr * sqrt(1 - beta2^t) / (1 - beta1^t); kAdamTorch/W: lr / (1 - beta1^t)
    float bc2_sqrt_ = 1.0f;  // kAdamTorch/W: sqrt(1 - beta2^t)
    float momentum_, beta1_, beta2_, epsilon_;
    float coupled_ = 0.0f;  // g += coupled_ * p (L2, all kinds but kAdamW and kLamb)
    float shrink_ = 1.0f;   // kAdamW: p *= shrink_ = 1 - lr * weight_decay
    LambKernel lamb_;       // kLamb
};

// Updates follow TensorFlow 1.x's GradientDescent, Momentum, Adagrad and Adam kernels, and
// torch.optim's SGD(nesterov), Adam and AdamW (OptimizerKind), so that results match the
// reference recipes. Not thread-safe: one caller at a time.
class Optimizer {
  public:
    Optimizer(const OptimizerConfig& config, std::size_t size);

    // params -= update(grads), as one tensor that decays when `decay` (UpdateKernel; kLamb: the
    // two phases below over [0, size()) on this thread).
    // REQUIRES: params.size() == grads.size() == size().
    void apply(std::span<float> params, std::span<const float> grads, bool decay = true);

    // The same update split across threads: call begin_update() once (it counts the update),
    // then apply_range() over disjoint [begin, end) ranges that together cover [0, size()), from
    // any threads, before the next begin_update(). params and grads are the whole spans.
    // kLamb: apply_range treats [begin, end) as one whole tensor (UpdateKernel); split a LAMB
    // update with the two phases below instead.
    void begin_update() { ++updates_; }
    // `decay`: [begin, end) lies in a tensor that decays (OptimizerConfig::decays).
    void apply_range(std::span<float> params, std::span<const float> grads, std::size_t begin, std::size_t end,
                     bool decay);
    // The same with the learning-rate multiplier and weight decay of `tensor`, the resolved
    // configuration of the tensor [begin, end) lies in (config().for_tensor(name, rank)).
    void apply_range(std::span<float> params, std::span<const float> grads, std::size_t begin, std::size_t end,
                     const OptimizerConfig& tensor);

    // kLamb's update split across threads (common/lamb.h), after begin_update(): lamb_moments()
    // over disjoint ranges that together cover [0, size()), each starting on a block edge (a
    // multiple of kLambBlockFloats) and ending on one or at size() (lamb_block_range), from any
    // threads; then lamb_finish() on one thread (the trust ratio of the whole span, returned); then
    // lamb_step() over disjoint ranges (any edges) covering [0, size()), from any threads. The
    // result is bit for bit that of apply() whatever the split. `decay` as in apply_range, the same
    // in both phases. params are the whole span; lamb_moments does not change them.
    void lamb_moments(std::span<const float> params, std::span<const float> grads, std::size_t begin, std::size_t end,
                      bool decay);
    float lamb_finish();
    void lamb_step(std::span<float> params, std::size_t begin, std::size_t end, bool decay);

    std::size_t size() const { return size_; }
    const OptimizerConfig& config() const { return config_; }
    // Number of apply() calls so far (Adam's t). Restored from checkpoints.
    std::uint64_t updates() const { return updates_; }
    void set_updates(std::uint64_t updates) { updates_ = updates; }

    // Slot vectors in a fixed order (momentum, nesterov: {accum}; adagrad: {accum}; adam,
    // adam_torch, adamw, lamb: {m, v}),
    // each size() floats. The spans stay valid for the optimizer's lifetime.
    std::vector<std::span<float>> slots();

  private:
    OptimizerConfig config_;
    std::size_t size_;
    std::uint64_t updates_ = 0;
    std::vector<float> slot0_;
    std::vector<float> slot1_;
    std::vector<LambNorms> lamb_blocks_;  // kLamb: phase 1's sums, one per block (not checkpointed)
    float lamb_trust_ = 1.0f;             // kLamb: lamb_finish()'s ratio, read by lamb_step()
};

// The update of a state tensor (common/tensor_layout.h TensorClass::kState): params -= delta
// over [begin, end), with no optimizer, slots, learning rate or schedule. The spans are whole
// tensors (or slices); REQUIRES begin <= end <= params.size() == delta.size().
void subtract_range(std::span<float> params, std::span<const float> delta, std::size_t begin, std::size_t end);

}  // namespace psrun
