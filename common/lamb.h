// LAMB (You et al. 2019, "Large Batch Optimization for Deep Learning", Algorithm 2), the form with
// bias correction that NVIDIA apex's FusedLAMB (use_nvlamb=True) and timm's Lamb (timm/optim/lamb.py,
// _single_tensor_lamb with always_adapt=True, trust_clip=False, decoupled_decay=False) compute, per
// tensor, in f32 with the norms summed in f64:
//   m = b1 m + (1 - b1) g;  v = b2 v + (1 - b2) g^2
//   r = (m / (1 - b1^t)) / (sqrt(v) / sqrt(1 - b2^t) + eps) + wd p      (wd: 0 unless the tensor decays)
//   trust = ||p|| / ||r|| when both norms are > 0, else 1                 (the paper's phi is the identity)
//   p -= lr * trust * r
// The trust ratio is on every trainable tensor, decayed or not (the paper's Algorithm 2; timm's default
// always_adapt=False and apex's default use_nvlamb=False leave the tensors with no decay at trust 1).
//
// The ratio needs norms over a whole tensor, so the update has two phases (Optimizer::lamb_moments,
// lamb_finish, lamb_step in common/optimizer.h): phase 1 updates m and v and sums ||p||^2 and ||r||^2 per
// block of kLambBlockFloats floats (a block's sum is always computed whole, by one thread, in one fixed
// order); lamb_finish() adds the blocks' sums in block order and takes the ratio; phase 2 recomputes r
// from m, v and the still unchanged p (no scratch buffer: one more float per parameter would cost psd a
// third more optimizer memory, while recomputing costs a sqrt and two divisions in a memory-bound pass)
// and moves p. So the result does not depend on how threads split the blocks: bit for bit the same with
// any team size or chunking.
//
// What "tensor" means where (the unit of the norms; approximations of whole-tensor LAMB):
// - a standalone worker (workerd/local_update.h): each whole tensor, exact;
// - psd's dense shards (psd/shard_state.h): each slice. A tensor cut over two shards (common/tensor_layout.h:
//   only tensors of at least kMinSliceFloats are cut, at most num_shards - 1 of them) gets one trust ratio
//   per slice, each shard knowing only its slice; shards never talk to each other, and a worker cannot
//   compute ||r|| (m and v live on psd). Uncut tensors (most of them) are exact;
// - psd's sparse rows (psd/row_store.h): each pushed row is its own unit (UpdateKernel runs LambKernel::whole
//   on it), as a dense [1, width] tensor would move.
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>

namespace psrun {

struct OptimizerConfig;

// Floats per block of the norms' partial sums. A phase-1 range starts on a block edge (relative to the
// span's first float) and ends on one or at the span's end.
inline constexpr std::size_t kLambBlockFloats = 4096;

// Sums of squares over some floats of one tensor: of the parameters before the update, and of r.
struct LambNorms {
    double params = 0.0;
    double update = 0.0;
};

// ||p|| / ||r||, or 1 when either is 0 (or not a number).
float lamb_trust_ratio(const LambNorms& sums);

// [begin, end) of part `part` of `parts` over n floats, on block edges: the phase-1 split.
std::pair<std::size_t, std::size_t> lamb_block_range(std::size_t n, int part, int parts);

// The arithmetic of update number t (>= 1) of one tensor. Stateless: every call may run on any thread.
class LambKernel {
  public:
    LambKernel() = default;
    // `tensor`: the tensor's resolved configuration (OptimizerConfig::for_tensor: lr_multiplier and
    // weight_decay); `decay`: weight_decay applies (OptimizerConfig::decays).
    LambKernel(const OptimizerConfig& tensor, std::uint64_t t, bool decay);

    // Phase 1 over n floats: updates m and v from g, returns the sums of p^2 and r^2 (p unchanged).
    LambNorms moments(const float* p, const float* g, float* m, float* v, std::size_t n) const;
    // Phase 2 over n floats: p -= lr * trust * r, r from m, v and p as phase 1 computed it.
    void step(float* p, const float* m, const float* v, std::size_t n, float trust) const;
    // Both phases over n floats as one whole tensor (a sparse row), with the blocks summed as
    // Optimizer::lamb_finish sums them: a [1, n] dense tensor moves bit for bit the same.
    void whole(float* p, const float* g, float* m, float* v, std::size_t n) const;

  private:
    float lr_ = 0.0f;  // the schedule's rate of update t times lr_multiplier
    float beta1_ = 0.9f, beta2_ = 0.999f, epsilon_ = 1e-8f;
    float bc1_ = 1.0f;       // 1 - beta1^t
    float bc2_sqrt_ = 1.0f;  // sqrt(1 - beta2^t)
    float decay_ = 0.0f;     // wd, or 0 for a tensor that does not decay
};

}  // namespace psrun
