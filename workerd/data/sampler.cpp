#include "workerd/data/sampler.h"

#include <algorithm>
#include <cassert>
#include <charconv>
#include <string>

#include "workerd/rng.h"

namespace psrun::worker {
namespace {

// fill_batch for float32 pixels or a normalization: per channel, (v - mean) * (1 / std), where v
// is pixel / 255 for uint8 and the stored value for float32.
void fill_general(const LabeledImages& data, std::span<const std::uint32_t> indices, std::span<float> images) {
    const ImageArray& a = data.images;
    const std::size_t channels = static_cast<std::size_t>(a.channels);
    const std::size_t plane = static_cast<std::size_t>(a.height) * static_cast<std::size_t>(a.width);
    const std::size_t pixels = channels * plane;
    const Normalization& n = data.normalization;
    const bool is_u8 = a.type == PixelType::kUint8;
    for (std::size_t b = 0; b < indices.size(); ++b) {
        const std::size_t base = indices[b] * pixels;
        float* dst = images.data() + b * pixels;
        for (std::size_t c = 0; c < channels; ++c) {
            const std::size_t k = n.mean.size() == 1 ? 0 : c;
            const float mean = n.empty() ? 0.0f : n.mean[k];
            const float inv_std = n.empty() ? 1.0f : 1.0f / n.std[k];
            float* out = dst + c * plane;
            if (is_u8) {
                constexpr float kScale = 1.0f / 255.0f;
                const std::uint8_t* src = a.u8.data() + base + c * plane;
                for (std::size_t p = 0; p < plane; ++p) out[p] = (static_cast<float>(src[p]) * kScale - mean) * inv_std;
            } else {
                const float* src = a.f32.data() + base + c * plane;
                for (std::size_t p = 0; p < plane; ++p) out[p] = (src[p] - mean) * inv_std;
            }
        }
    }
}

}  // namespace

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
        std::from_chars(b.data(), b.data() + b.size(), spec.count).ptr != b.data() + b.size() ||
        a.empty() || b.empty() || spec.count < 1 || spec.index < 0 || spec.index >= spec.count) {
        return bad();
    }
    return spec;
}

Sampler::Sampler(std::size_t dataset_size, std::uint64_t seed, ShardSpec shard)
    : seed_(seed), shard_(shard) {
    for (std::size_t i = static_cast<std::size_t>(shard.index); i < dataset_size;
         i += static_cast<std::size_t>(shard.count)) {
        order_.push_back(static_cast<std::uint32_t>(i));
    }
    if (order_.empty()) {
        throw UsageError("--shard " + std::to_string(shard.index) + "/" +
                         std::to_string(shard.count) + ": the shard of a " +
                         std::to_string(dataset_size) + "-example dataset is empty");
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

void fill_batch(const LabeledImages& data, std::span<const std::uint32_t> indices,
                std::span<float> images, std::span<std::int32_t> labels) {
    const ImageArray& a = data.images;
    const std::size_t pixels = a.example_size();
    assert(images.size() == indices.size() * pixels && labels.size() == indices.size());
    for (std::size_t b = 0; b < indices.size(); ++b) labels[b] = data.labels[indices[b]];
    if (a.type == PixelType::kUint8 && data.normalization.empty()) {
        // The MNIST path: exactly the floats it always produced.
        constexpr float kScale = 1.0f / 255.0f;
        for (std::size_t b = 0; b < indices.size(); ++b) {
            const std::uint8_t* src = a.u8.data() + indices[b] * pixels;
            float* dst = images.data() + b * pixels;
            for (std::size_t p = 0; p < pixels; ++p) dst[p] = static_cast<float>(src[p]) * kScale;
        }
        return;
    }
    fill_general(data, indices, images);
}

}  // namespace psrun::worker
