// What a model takes and predicts, as the data side needs to know it: the kind and shape of one
// example's input and the kind of its target. The model side fills it (workerd/datasets.h
// model_input()); the readers and batch sources check and fill batches against it. Plain value.
#pragma once

#include <cstdint>
#include <string>

namespace psrun::worker {

enum class InputKind {
    kImage,     // float32 channels x height x width (pixels stored as uint8 or float32)
    kFeatures,  // float32 vector of `length` values
    kTokens,    // int32 token ids, `length` of them, each in 0..vocabulary-1
};

enum class TargetKind {
    kClass,   // one int32 label in 0..classes-1
    kVector,  // float32 vector of `target_length` values (regression targets, multi-hot labels)
};

// The first five fields keep the aggregate form ModelInput{name, channels, height, width,
// classes} of an image classifier.
struct ModelInput {
    std::string name;  // only appears in messages
    int channels = 1;
    int height = 28;
    int width = 28;
    int classes = 10;  // kClass targets
    InputKind input = InputKind::kImage;
    std::int64_t length = 0;      // kFeatures: F values; kTokens: L ids
    std::int64_t vocabulary = 0;  // kTokens: ids are < vocabulary
    // kTokens read by a table keyed by raw ids (--raw-ids): exact 64-bit ids
    // (LabeledImages::raw_tokens), no vocabulary.
    bool raw_ids = false;
    TargetKind target = TargetKind::kClass;
    std::int64_t target_length = 0;  // kVector: T values
    // False for a model whose loss reads no labels (a loss in the graph whose targets are columns,
    // or none): the data's labels are then optional (--train-labels may be left out) and any
    // class is accepted (`classes` is INT_MAX).
    bool labels_needed = true;

    // Values of one example's input: C*H*W for images, `length` otherwise.
    std::int64_t input_size() const {
        return input == InputKind::kImage ? std::int64_t{channels} * height * width : length;
    }
    // "1x28x28", "64 features", "128 tokens"; for messages.
    std::string input_text() const {
        switch (input) {
            case InputKind::kImage:
                return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width);
            case InputKind::kFeatures: return std::to_string(length) + " features";
            case InputKind::kTokens: return std::to_string(length) + " tokens";
        }
        return {};
    }
};

}  // namespace psrun::worker
