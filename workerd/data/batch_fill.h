// Copying examples out of an in-memory dataset into a batch, converting as training always
// has: uint8 pixels (and uint8 features) become p / 255, float32 values are copied, then the
// data's normalization maps each value v of channel c to (v - mean[c]) / std[c]; token ids,
// labels and target vectors are copied. Pure functions, thread-safe on distinct outputs.
#pragma once

#include <cstdint>
#include <span>

#include "workerd/data/batch_source.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

// Pixel (or feature) rows wherever they live: an ImageArray's vectors or a memory-mapped file.
// Example i starts at element i * channels * plane; `nhwc`: stored H x W x C (moved to C x H x W
// on the way).
struct PixelRows {
    PixelType type = PixelType::kUint8;
    const std::uint8_t* u8 = nullptr;
    const float* f32 = nullptr;
    std::size_t channels = 1;
    std::size_t plane = 1;  // height * width
    bool nhwc = false;
};

// Converts the rows at `indices` into `out` (indices.size() * channels * plane floats, CHW):
// uint8 / 255, then (v - mean[c]) / std[c] when `normalization` is given.
void fill_pixels(const PixelRows& rows, const Normalization& normalization, std::span<const std::uint32_t> indices,
                 std::span<float> out);

// Copies the examples at `indices` into `images` (NCHW) and `labels`: uint8 pixels become
// pixel / 255 (bit-identical to `float(p) * (1.0f / 255.0f)`), float32 pixels are copied; then
// the data's normalization, if any, maps each value v of channel c to (v - mean[c]) / std[c].
// REQUIRES: images.size() == indices.size() * data.images.example_size(),
// labels.size() == indices.size(), every index < data.size(), class targets.
void fill_batch(const LabeledImages& data, std::span<const std::uint32_t> indices, std::span<float> images,
                std::span<std::int32_t> labels);

// The general form: example indices[b] goes to slot b of every span of `out` the data has
// (inputs_f32 for images and features, inputs_i32 for tokens, labels or targets, and each of the
// data's input columns to out.columns at the same position). Spans the
// data does not have are left alone; a span the data has but `out` lacks is skipped too.
// REQUIRES: each used span holds indices.size() examples of the data's per-example size.
void fill_examples(const LabeledImages& data, std::span<const std::uint32_t> indices, const BatchView& out);

}  // namespace psrun::worker
