// Reader for NumPy .npy files (format versions 1.0, 2.0 and 3.0), raw or gzip-compressed: what
// np.save writes. Images: uint8 or float32, shape (N, H, W), (N, C, H, W) or (N, H, W, C) (moved
// to N x C x H x W on load). Labels: uint8, int32 or int64, shape (N,) or (N, 1). Either byte order
// the header declares is read; fortran_order True and other dtypes are refused. Every failure is an
// Error naming the file (kInvalidArgument).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

// How a rank-4 image array is laid out. kAuto: where the model's image dims are known and only one
// layout fits them, that one (resolve_image_layout); else the axis of size <= 4 among axes 1 and 3
// is the channel axis, and when both or neither are, the error asks for --image-layout.
enum class ImageLayout { kAuto, kNchw, kNhwc };

[[nodiscard]] Result<ImageLayout> parse_image_layout(std::string_view text);  // auto|nchw|nhwc

// True when `bytes` start with the .npy magic "\x93NUMPY".
bool looks_like_npy(const std::vector<std::uint8_t>& bytes);

// The parsed header of a .npy file.
struct NpyHeader {
    char kind = 0;               // 'u', 'i', 'f', ...: numpy's dtype kind
    std::size_t item_bytes = 0;  // 1, 2, 4, 8
    bool big_endian = false;
    std::vector<std::uint64_t> shape;
    std::size_t data_offset = 0;  // where the array's bytes start
    std::string descr;            // as written, for messages
};

// Parses and checks the header (magic, version, dict, fortran_order False); `path` names the file.
[[nodiscard]] Result<NpyHeader> parse_npy_header(const std::vector<std::uint8_t>& bytes, const std::string& path);

// The channels, height and width a model's images have, where the caller knows them.
struct ImageDims {
    int channels = 0;
    int height = 0;
    int width = 0;
};

// `layout`, or where it is kAuto and `expect` is given, the one layout under which a rank-4 array
// of `shape` holds images of exactly `expect` (N x 8 x 6 x 6 for an 8x6x6 model is N x C x H x W,
// though neither axis 1 nor axis 3 is <= 4); kAuto when both or neither fit.
ImageLayout resolve_image_layout(const std::vector<std::uint64_t>& shape, ImageLayout layout, const ImageDims* expect);

// Images from a .npy array: (N, H, W), or rank 4 laid out as `layout` (resolved against `expect`
// as resolve_image_layout() says).
[[nodiscard]] Result<ImageArray> parse_npy_images(const std::vector<std::uint8_t>& bytes, const std::string& path,
                                                  ImageLayout layout = ImageLayout::kAuto,
                                                  const ImageDims* expect = nullptr);
[[nodiscard]] Result<std::vector<std::int32_t>> parse_npy_labels(const std::vector<std::uint8_t>& bytes,
                                                                 const std::string& path);

}  // namespace psrun::worker
