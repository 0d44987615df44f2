// Reader for one PNG image (libpng's simplified API) into the uint8 NCHW form the other readers
// produce, with the channels a model wants: 1 (gray) or 3 (RGB). libpng converts between them
// (colour to gray by its sRGB luminance weights, gray to colour by repeating the value) and
// composites any alpha channel onto black; `converted` says when the file's colour type was
// not the one asked for, so that a caller can say so. Every failure is kInvalidArgument
// "<path>: <problem>".
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

struct PngImage {
    ImageArray image;         // count 1, `channels` channels, uint8
    bool converted = false;   // the file was colour and gray was asked for, or the other way round
    bool file_color = false;  // the file itself holds colour
};

// True when `bytes` start with the 8-byte PNG signature.
bool looks_like_png(std::span<const std::uint8_t> bytes);

// What decode_png found.
struct PngInfo {
    int width = 0;
    int height = 0;
    bool file_color = false;  // the file holds colour (RGB or a colour palette)
    bool file_alpha = false;  // the file has an alpha channel or transparency
};

// Decodes any PNG (gray, gray+alpha, RGB, RGBA, palette, 1-16 bits per sample) into `hwc`:
// width x height x `channels` interleaved uint8 (16-bit samples are scaled to 8 bits, alpha is
// composited onto black, colour becomes gray by libpng's sRGB luminance, gray is repeated into
// R, G and B). REQUIRES channels 1 or 3. Sides above kMaxImageSide are refused.
[[nodiscard]] Result<PngInfo> decode_png(std::span<const std::uint8_t> bytes, const std::string& path, int channels,
                                         std::vector<std::uint8_t>& hwc);

// REQUIRES: channels is 1 or 3 (else kInvalidArgument). Sides above kMaxImageSide are refused.
[[nodiscard]] Result<PngImage> parse_png(const std::vector<std::uint8_t>& bytes, const std::string& path, int channels);

}  // namespace psrun::worker
