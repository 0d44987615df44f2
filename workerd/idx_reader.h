// Reader for the IDX files MNIST and Fashion-MNIST ship in (images: idx3 ubyte, labels: idx1
// ubyte), raw or gzip-compressed. Every check failure is an Error naming the file and the problem.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

inline constexpr std::uint32_t kIdxImagesMagic = 0x00000803;  // unsigned byte, 3 dimensions
inline constexpr std::uint32_t kIdxLabelsMagic = 0x00000801;  // unsigned byte, 1 dimension
inline constexpr int kNumClasses = 10;

struct IdxImages {
    std::size_t count = 0;
    int rows = 0;
    int cols = 0;
    std::vector<std::uint8_t> pixels;  // count * rows * cols, row-major, one image after another
};

struct IdxLabels {
    std::vector<std::uint8_t> labels;  // each < kNumClasses
};

// One split (train or test) of a dataset: images and labels checked to match.
struct LabeledImages {
    IdxImages images;
    IdxLabels labels;
    std::size_t size() const { return images.count; }
    const std::uint8_t* image(std::size_t i) const {
        return images.pixels.data() + i * static_cast<std::size_t>(images.rows * images.cols);
    }
};

// Reads a whole file, inflating it if it starts with the gzip magic bytes.
[[nodiscard]] Result<std::vector<std::uint8_t>> read_maybe_gzip(const std::string& path);

// The in-memory half of read_maybe_gzip: inflates `bytes` if they start with the gzip magic
// bytes, else returns them unchanged. `path` only names the source in error messages.
[[nodiscard]] Result<std::vector<std::uint8_t>> maybe_inflate(std::vector<std::uint8_t> bytes,
                                                              const std::string& path);

// Parses an in-memory IDX buffer; `path` only names the file in error messages.
[[nodiscard]] Result<IdxImages> parse_idx_images(const std::vector<std::uint8_t>& bytes,
                                                 const std::string& path);
[[nodiscard]] Result<IdxLabels> parse_idx_labels(const std::vector<std::uint8_t>& bytes,
                                                 const std::string& path);

[[nodiscard]] Result<IdxImages> read_idx_images(const std::string& path);
[[nodiscard]] Result<IdxLabels> read_idx_labels(const std::string& path);

// Loads <dir>/<prefix>-images-idx3-ubyte[.gz] and <dir>/<prefix>-labels-idx1-ubyte[.gz]
// (prefix "train" or "t10k"); fails if the counts differ.
[[nodiscard]] Result<LabeledImages> load_split(const std::string& dir, const std::string& prefix);

}  // namespace psrun::worker
