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

// Copies the examples at `indices` into `images` (NCHW) and `labels`: uint8 pixels become
// pixel / 255 (bit-identical to `float(p) * (1.0f / 255.0f)`), float32 pixels are copied; then
// the data's normalization, if any, maps each value v of channel c to (v - mean[c]) / std[c].
// REQUIRES: images.size() == indices.size() * data.images.example_size(),
// labels.size() == indices.size(), every index < data.size(), class targets.
void fill_batch(const LabeledImages& data, std::span<const std::uint32_t> indices,
                std::span<float> images, std::span<std::int32_t> labels);

// The general form: example indices[b] goes to slot b of every span of `out` the data has
// (inputs_f32 for images and features, inputs_i32 for tokens, labels or targets). Spans the
// data does not have are left alone; a span the data has but `out` lacks is skipped too.
// REQUIRES: each used span holds indices.size() examples of the data's per-example size.
void fill_examples(const LabeledImages& data, std::span<const std::uint32_t> indices, const BatchView& out);

}  // namespace psrun::worker
