// An exponential moving average of a shard's dense parameters (--ema-decay D), one vector per own
// slice, kept beside the parameters by ShardState and saved with them ("<piece>/ema" in a
// checkpoint, psd/shard_checkpoint.h). After each update t the average is
//   ema_t = p_t                          for the first update it sees (t = 1, or the first after a
//                                        restore from a checkpoint without an average),
//   ema_t = D * ema_{t-1} + (1 - D) * p_t   after that,
// which is torch.optim.swa_utils.AveragedModel(use_buffers=True) with avg_fn
// D * averaged + (1 - D) * current, updated after every optimizer step. Every dense tensor is
// averaged, state tensors (BatchNorm's moving statistics) included, as that form and timm's
// ModelEmaV2 do. Sparse tables' rows get the same average from RowStore (psd/row_store.h), kept
// lazily per row on the same clock (every update of the shard), saved as "<table>@<s>%<K>/ema".
// Not thread-safe as a whole; update_range() may run on disjoint ranges from several threads
// between two finish_update() calls.
#pragma once

#include <cstddef>
#include <span>
#include <vector>

namespace psrun::psd {

class WeightAverage {
  public:
    // Off (enabled() false) until reset().
    WeightAverage() = default;

    // Averages slices of these lengths with `decay` in (0, 1); decay 0 turns the average off and
    // frees it. The average starts as a copy of `params` (one span per slice) with started() false:
    // the next update copies its parameters.
    void reset(float decay, const std::vector<std::span<const float>>& params);
    // A new decay for a running job (a restore with other options): an average that is on keeps
    // its values; one turned on starts as reset() does; decay 0 turns it off.
    void retune(float decay, const std::vector<std::span<const float>>& params);
    // Takes a saved average (one vector per slice, same lengths) that has started.
    void set(float decay, std::vector<std::vector<float>> values);

    bool enabled() const { return decay_ > 0.0f; }
    bool started() const { return started_; }
    float decay() const { return decay_; }
    // The average of slice k (its length; empty when off).
    std::span<const float> slice(std::size_t k) const;
    std::size_t floats() const;

    // Folds params[begin, end) of slice k (the slice's updated parameters) into the average.
    void update_range(std::size_t k, std::span<const float> params, std::size_t begin, std::size_t end);
    // Ends an update: the average has started.
    void finish_update() { started_ = enabled(); }

  private:
    float decay_ = 0.0f;
    bool started_ = false;
    std::vector<std::vector<float>> values_;
};

}  // namespace psrun::psd
