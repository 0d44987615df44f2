// Synthetic labelled images for `psrun data synthesize` and `psrun bench data`: each class has
// its own smooth colour gradient and each image adds random blobs and pixel noise, so that JPEG
// and PNG sizes are those of photographs rather than of flat colour, and a model can tell the
// classes apart. Deterministic in (seed, index). Thread-safe.
#pragma once

#include <cstdint>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

struct ImageShape {
    int channels = 3;
    int height = 64;
    int width = 64;
};

// "CxHxW", e.g. "3x64x64"; channels 1 or 3, sides 1-4096.
[[nodiscard]] Result<ImageShape> parse_image_shape(std::string_view text);

// Image `index` of class `label` (HWC uint8, shape.height x shape.width x shape.channels).
std::vector<std::uint8_t> synthetic_image(const ImageShape& shape, int label, std::uint64_t seed, std::uint64_t index);

}  // namespace psrun::worker
