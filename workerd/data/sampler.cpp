#include "workerd/data/sampler.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <string>

#include "common/rng.h"

namespace psrun::worker {

Result<ShardSpec> parse_shard(std::string_view text) {
    const auto slash = text.find('/');
    ShardSpec spec;
    auto bad = [&] {
        return make_error(ErrorCode::kInvalidArgument,
                          "bad --shard '" + std::string(text) + "': expected i/n with 0 <= i < n");
    };
    if (slash == std::string_view::npos) return bad();
    const auto a = text.substr(0, slash), b = text.substr(slash + 1);
    if (std::from_chars(a.data(), a.data() + a.size(), spec.index).ptr != a.data() + a.size() ||
        std::from_chars(b.data(), b.data() + b.size(), spec.count).ptr != b.data() + b.size() || a.empty() ||
        b.empty() || spec.count < 1 || spec.index < 0 || spec.index >= spec.count) {
        return bad();
    }
    return spec;
}

Sampler::Sampler(std::size_t dataset_size, std::uint64_t seed, ShardSpec shard) : seed_(seed), shard_(shard) {
    for (std::size_t i = static_cast<std::size_t>(shard.index); i < dataset_size;
         i += static_cast<std::size_t>(shard.count)) {
        order_.push_back(static_cast<std::uint32_t>(i));
    }
    if (order_.empty()) {
        throw UsageError("--shard " + std::to_string(shard.index) + "/" + std::to_string(shard.count) +
                         ": the shard of a " + std::to_string(dataset_size) + "-example dataset is empty");
    }
    shuffle();
}

void Sampler::shuffle() {
    // Fisher-Yates from a generator keyed by (seed, shard, epoch): a restart with the same
    // seed replays the same order.
    Rng rng(seed_, (static_cast<std::uint64_t>(shard_.index) << 32) ^ epoch_);
    for (std::size_t i = order_.size(); i > 1; --i) {
        std::swap(order_[i - 1], order_[rng.below(i)]);
    }
}

void Sampler::seek(std::uint64_t examples) {
    const std::uint64_t target = examples / order_.size();
    if (target < epoch_) {
        std::sort(order_.begin(), order_.end());  // back to the unshuffled shard
        epoch_ = 0;
        shuffle();
    }
    while (epoch_ < target) {
        ++epoch_;
        shuffle();
    }
    pos_ = static_cast<std::size_t>(examples % order_.size());
}

void Sampler::next_batch(std::span<std::uint32_t> out) {
    for (auto& index : out) {
        if (pos_ == order_.size()) {
            ++epoch_;
            pos_ = 0;
            shuffle();
        }
        index = order_[pos_++];
    }
}

}  // namespace psrun::worker
