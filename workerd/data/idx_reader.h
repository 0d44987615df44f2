// Reader for IDX files (the format MNIST and Fashion-MNIST ship in), raw or gzip-compressed.
// Images: unsigned byte (type 0x08) or big-endian float32 (0x0D), rank 3 (N x H x W, one channel)
// or rank 4 (N x C x H x W). Labels: unsigned byte, rank 1. Every check failure is an Error naming
// the file and the problem (kInvalidArgument; a missing file kNotFound).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/data/labeled_images.h"
#include "workerd/data/reader_common.h"

namespace psrun::worker {

inline constexpr std::uint32_t kIdxImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
inline constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
inline constexpr std::uint8_t kIdxUbyte = 0x08;
inline constexpr std::uint8_t kIdxFloat = 0x0D;

// True when `bytes` start like an IDX file (two zero bytes, a known type, rank 1-4).
bool looks_like_idx(const std::vector<std::uint8_t>& bytes);

// Parse an in-memory IDX buffer; `path` only names the file in error messages. Image values are
// checked finite (float32); labels are not range-checked here (check_fits_model does, against
// the model's classes).
[[nodiscard]] Result<ImageArray> parse_idx_images(const std::vector<std::uint8_t>& bytes, const std::string& path);
[[nodiscard]] Result<std::vector<std::int32_t>> parse_idx_labels(const std::vector<std::uint8_t>& bytes,
                                                                 const std::string& path);

[[nodiscard]] Result<ImageArray> read_idx_images(const std::string& path);
[[nodiscard]] Result<std::vector<std::int32_t>> read_idx_labels(const std::string& path);

// Loads <dir>/<prefix>-images-idx3-ubyte[.gz] and <dir>/<prefix>-labels-idx1-ubyte[.gz]
// (prefix "train" or "t10k"); fails if the counts differ or a label is outside 0-9 (the ten
// classes of the MNIST-format datasets).
[[nodiscard]] Result<LabeledImages> load_split(const std::string& dir, const std::string& prefix);

}  // namespace psrun::worker
