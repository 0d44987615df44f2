// Reader for one grayscale image in the netpbm PGM format: "P5" (binary) or "P2" (ASCII),
// maxval 1..255, '#' comments anywhere a header field may start (netpbm's rule). Pixels are
// rescaled to 0..255 (v * 255 / maxval, rounded) so that a PGM of any maxval means what
// training's uint8 / 255 means. One image per file: anything but whitespace after its pixels
// is refused. Every failure is kInvalidArgument "<path>: <problem>".
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

// True when `bytes` start with "P5" or "P2" followed by whitespace.
bool looks_like_pgm(const std::vector<std::uint8_t>& bytes);

// Parses an in-memory PGM; `path` only names the file in errors. Success: count 1, channels 1,
// uint8 pixels, height and width in 1..kMaxImageSide (reader_common.h).
[[nodiscard]] Result<ImageArray> parse_pgm(const std::vector<std::uint8_t>& bytes, const std::string& path);

}  // namespace psrun::worker
