// Encoding images as JPEG (libjpeg-turbo) and PNG (libpng), for `psrun data synthesize`,
// `psrun bench data` and tests. Not for training (the readers decode). Thread-safe (each call
// has its own encoder state).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

// `hwc`: height x width x channels (1 gray or 3 RGB) uint8. quality 1-100; 4:2:0 subsampling
// for colour (libjpeg-turbo's and PIL's default), none for gray.
[[nodiscard]] Result<std::vector<std::uint8_t>> encode_jpeg(std::span<const std::uint8_t> hwc, int width, int height,
                                                            int channels, int quality);
// 8-bit gray or RGB PNG.
[[nodiscard]] Result<std::vector<std::uint8_t>> encode_png(std::span<const std::uint8_t> hwc, int width, int height,
                                                           int channels);

}  // namespace psrun::worker
