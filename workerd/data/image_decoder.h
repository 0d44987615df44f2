// One encoded image (JPEG, PNG or PGM, told apart by their first bytes) decoded and fitted to a
// model's input: the model's channels (1: gray, 3: RGB; a colour image for a gray model is
// converted to its luminance, a gray one for an RGB model repeated into the three channels),
// then resized to its height x width by the --image-resize mode (workerd/data/image_resize.h),
// as planar uint8 C x H x W. An ImageDecoder keeps its libjpeg-turbo handle and scratch buffers
// between images; it is not thread-safe: one per decoding thread.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/image_resize.h"
#include "workerd/data/jpeg_reader.h"

namespace psrun::worker {

enum class ImageFormat { kUnknown, kJpeg, kPng, kPgm };

// By content: FF D8 FF is JPEG, the PNG signature PNG, "P5"/"P2" PGM.
ImageFormat sniff_image(std::span<const std::uint8_t> bytes);
const char* to_string(ImageFormat format);

// The size and channels a decoded image is brought to.
struct ImageTarget {
    int channels = 1;  // 1 or 3
    int height = 28;
    int width = 28;
    ResizeMode resize = ResizeMode::kCrop;
};

// What one decode found in the file.
struct DecodedImage {
    ImageFormat format = ImageFormat::kUnknown;
    int width = 0;  // of the file
    int height = 0;
    bool converted = false;  // colour read as gray or gray as colour
    bool resized = false;    // the file was not target-sized
};

class ImageDecoder {
  public:
    // Decodes `bytes` into `out` (REQUIRES out.size() == channels * height * width).
    // `what` names the source in errors ("F", "F: record 17 at offset 4096"). Errors are
    // kInvalidArgument: not an image of these formats, a damaged one, a target of other than
    // 1 or 3 channels.
    [[nodiscard]] Result<DecodedImage> decode(std::span<const std::uint8_t> bytes, const ImageTarget& target,
                                              std::span<std::uint8_t> out, const std::string& what);

  private:
    JpegDecoder jpeg_;
    std::vector<std::uint8_t> hwc_;
    std::vector<float> scratch_;
};

}  // namespace psrun::worker
