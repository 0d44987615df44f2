// The in-memory dataset every reader produces: N examples, each an input and a target. Inputs are
// images of C x H x W pixels (NCHW, one example after another), feature vectors (stored as
// 1 x 1 x F images) or token ids; targets are an int32 class label or a float32 vector. Pixels
// and features stay uint8 when the source is uint8 (4x less memory; fill_batch converts per
// batch) and are float32 otherwise. The same type holds a decoded chunk of a stream and a
// shuffle buffer (workerd/data/stream_source.h). Plain values: no locking, a const
// LabeledImages may be read from any number of threads.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "workerd/data/model_input.h"

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
        return static_cast<std::size_t>(channels) * static_cast<std::size_t>(height) * static_cast<std::size_t>(width);
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

// The values of one model input after the first, for every example of a split, in example order
// (--train-input NAME=FILE.npy): floats or int32 ids, per_example of them each.
struct InputColumn {
    std::string name;  // the model input
    std::string file;  // where the values came from, for messages
    std::size_t per_example = 0;
    std::vector<float> f32;          // a float input
    std::vector<std::int32_t> i32;   // an int input
    std::vector<std::uint64_t> u64;  // an int input read by a table keyed by raw ids (--raw-ids): the raw ids
};

struct LabeledImages {
    InputKind input = InputKind::kImage;
    ImageArray images;                 // kImage; kFeatures as 1 x 1 x F; unused (count 0) for kTokens
    std::vector<std::int32_t> tokens;  // kTokens: size() * token_length ids
    // kTokens read by a table keyed by raw ids (ModelInput::raw_ids): the raw ids, in place of tokens.
    std::vector<std::uint64_t> raw_tokens;
    std::size_t token_length = 0;
    TargetKind target = TargetKind::kClass;
    std::vector<std::int32_t> labels;  // kClass: one per example (labels.size() == size())
    std::vector<float> targets;        // kVector: size() * target_length values
    std::size_t target_length = 0;
    Normalization normalization;  // images and features: empty or 1 or images.channels pairs
    // Class names, index = label (image folders: the sorted folder names); empty when the source
    // has none.
    std::vector<std::string> class_names;
    // The model's inputs after the first (inputs[1..], in order), each size() rows; empty for a
    // single-input model. The images, tokens or features above are the primary input.
    std::vector<InputColumn> columns{};

    std::size_t size() const {
        if (input != InputKind::kTokens) return images.count;
        return token_length ? std::max(tokens.size(), raw_tokens.size()) / token_length : 0;
    }
    // "1x28x28", "13 features", "128 tokens" per example, for messages.
    std::string input_text() const;
};

// How a split's two halves are named in messages, e.g. "train images /d/x.npy".
struct SplitNames {
    std::string images;
    std::string labels;
};

// Reshapes `split` where only the view differs: feature vectors of C*H*W values for an image
// model become C x H x W images, images for a features model of that length become vectors
// (both only with at most one --normalize pair). Anything else is left for check_fits_model.
void conform_to_model(LabeledImages& split, const ModelInput& model);

// Checks that `split` fits `model`: its input kind and shape (tokens: every id below the
// vocabulary), its target kind (every label in range, or vectors of the model's length), as
// many targets as inputs, and a normalization with 1 or `channels` pairs. The error names the
// offending file (kInvalidArgument).
[[nodiscard]] Result<void> check_fits_model(const LabeledImages& split, const SplitNames& names,
                                            const ModelInput& model);

}  // namespace psrun::worker
