// Fitting a decoded image to a model's input size: `crop` scales the image so that it covers the
// target (the shorter side fits) and cuts the centre out, `pad` scales it so that it fits inside
// (the longer side fits) and centres it on black, `stretch` scales each axis to the target
// regardless of the aspect ratio. An image already of the target size is copied unchanged (every
// mode). Resampling is separable with a triangle (bilinear) filter whose support widens with the
// reduction factor, so that downscaling averages every source pixel (antialiased, as PIL's
// BILINEAR); results are rounded to uint8. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

enum class ResizeMode { kCrop, kPad, kStretch };

[[nodiscard]] Result<ResizeMode> parse_resize_mode(std::string_view text);  // crop|pad|stretch
const char* to_string(ResizeMode mode);

// An interleaved (HWC) uint8 image.
struct HwcImage {
    const std::uint8_t* pixels = nullptr;
    int width = 0;
    int height = 0;
    int channels = 1;
};

// The part of a w x h source image, scaled to cover or fit out_w x out_h, that the target
// shows, and where it goes: source rectangle [x0, x0 + sw) x [y0, y0 + sh) (fractional) onto
// destination rectangle [dx, dx + dw) x [dy, dy + dh) (whole pixels).
struct ResizePlan {
    double x0 = 0, y0 = 0, sw = 0, sh = 0;
    int dx = 0, dy = 0, dw = 0, dh = 0;
};
ResizePlan plan_resize(int w, int h, int out_w, int out_h, ResizeMode mode);

// The smallest size a w x h image can be reduced to before resize_to_chw without that step
// having to enlarge it (for decoding a JPEG at a DCT scale): out_w x out_h for stretch, the
// image scaled to cover (crop) or fit (pad) the target otherwise.
void min_source_size(int w, int h, int out_w, int out_h, ResizeMode mode, int& min_w, int& min_h);

// Writes `src` fitted to out_w x out_h into `out` as planar CHW (channels = src.channels),
// pixels outside the destination rectangle 0. `scratch` is reused between calls.
// REQUIRES: out.size() == channels * out_h * out_w; sizes >= 1.
void resize_to_chw(const HwcImage& src, int out_w, int out_h, ResizeMode mode, std::span<std::uint8_t> out,
                   std::vector<float>& scratch);

}  // namespace psrun::worker
