// Which examples each step reads: a worker's shard of the training set, reshuffled every epoch
// from (seed, shard, epoch), handed out in batches that run on into the next epoch.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "workerd/data/batch_fill.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

struct ShardSpec {
    int index = 0;  // 0 <= index < count
    int count = 1;
};

// Parses "i/n" (0 <= i < n).
[[nodiscard]] Result<ShardSpec> parse_shard(std::string_view text);

// Shard i of n holds the examples whose index is congruent to i modulo n: shards are disjoint and
// together cover the dataset. Not thread-safe.
class Sampler {
  public:
    // Throws UsageError when the shard is empty (more shards than examples).
    Sampler(std::size_t dataset_size, std::uint64_t seed, ShardSpec shard = {});

    // Writes the next out.size() example indices; starts a new, reshuffled epoch when the
    // current one is used up.
    void next_batch(std::span<std::uint32_t> out);

    // Jumps to the state after `examples` examples were drawn since the start (epoch 0):
    // the same indices follow as if they had been drawn one batch at a time. Replays the
    // per-epoch shuffles up to the target epoch (cheap: one shuffle per epoch).
    void seek(std::uint64_t examples);
    // Examples drawn since the start, over all epochs.
    std::uint64_t position() const { return epoch_ * order_.size() + pos_; }
    std::size_t offset() const { return pos_; }  // within the current epoch

    std::uint64_t epoch() const { return epoch_; }
    std::size_t shard_size() const { return order_.size(); }

  private:
    void shuffle();

    std::uint64_t seed_;
    ShardSpec shard_;
    std::vector<std::uint32_t> order_;
    std::size_t pos_ = 0;
    std::uint64_t epoch_ = 0;
};

}  // namespace psrun::worker
