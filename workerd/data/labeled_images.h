// The in-memory dataset every reader produces: N examples of C x H x W pixels (NCHW, one example
// after another) and one int32 label each. Pixels stay uint8 when the source is uint8 (4x less
// memory; fill_batch converts per batch) and are float32 otherwise. Plain values: no locking, a
// const LabeledImages may be read from any number of threads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

enum class PixelType { kUint8, kFloat32 };

struct ImageArray {
    std::size_t count = 0;
    int channels = 1;
    int height = 0;
    int width = 0;
    PixelType type = PixelType::kUint8;
    std::vector<std::uint8_t> u8;  // type kUint8: count * channels * height * width values
    std::vector<float> f32;        // type kFloat32: the same count; the other vector is empty

    std::size_t example_size() const {
        return static_cast<std::size_t>(channels) * static_cast<std::size_t>(height) *
               static_cast<std::size_t>(width);
    }
    std::string shape() const;  // "CxHxW", one example
};

// Per-channel (x - mean) / std, applied by fill_batch after uint8 pixels are scaled to [0, 1]
// (float32 pixels are used as stored). Empty: no normalization. One value each: every channel.
struct Normalization {
    std::vector<float> mean;
    std::vector<float> std;
    bool empty() const { return mean.empty(); }
};

// Parses --normalize: "MEAN,STD" (every channel) or "M1,M2,...:S1,S2,..." (one pair per channel,
// as many means as stds). Every std must be > 0, every value finite. `text` empty: no
// normalization.
[[nodiscard]] Result<Normalization> parse_normalization(std::string_view text);

struct LabeledImages {
    ImageArray images;
    std::vector<std::int32_t> labels;  // labels.size() == images.count
    Normalization normalization;       // empty or 1 or images.channels pairs
    std::size_t size() const { return images.count; }
};

// What a model takes: each example channels x height x width, labels in 0..classes-1. `name`
// only appears in messages.
struct ModelInput {
    std::string name;
    int channels = 1;
    int height = 28;
    int width = 28;
    int classes = 10;
};

// How a split's two halves are named in messages, e.g. "train images /d/x.npy".
struct SplitNames {
    std::string images;
    std::string labels;
};

// Checks that `split` fits `model`: its example shape, every label in range, and a normalization
// with 1 or `channels` pairs. The error names the offending file (kInvalidArgument).
[[nodiscard]] Result<void> check_fits_model(const LabeledImages& split, const SplitNames& names,
                                            const ModelInput& model);

}  // namespace psrun::worker
