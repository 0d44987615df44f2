// What the IDX, .npy and CIFAR readers share: whole-file reading with transparent gzip, and the
// limits every declared shape is checked against before anything is allocated for it.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

// Largest height, width or channel count a reader accepts (real datasets are far below).
inline constexpr std::uint64_t kMaxImageSide = 4096;
// Most examples in one file: the sampler indexes examples with uint32.
inline constexpr std::uint64_t kMaxExamples = 0xffffffffULL;
// Most bytes an inflated .gz file may hold.
inline constexpr std::size_t kMaxInflatedBytes = std::size_t{1} << 32;

// Reads a whole file, inflating it if it starts with the gzip magic bytes. Missing file:
// kNotFound; other read failures kIo; a bad gzip stream kInvalidArgument. Messages start "<path>:
// ".
[[nodiscard]] Result<std::vector<std::uint8_t>> read_maybe_gzip(const std::string& path);

// The in-memory half of read_maybe_gzip: inflates `bytes` if they start with the gzip magic
// bytes, else returns them unchanged. `path` only names the source in error messages.
[[nodiscard]] Result<std::vector<std::uint8_t>> maybe_inflate(std::vector<std::uint8_t> bytes, const std::string& path);

// The first `n` bytes as "\x50\x4b...", for messages about unknown formats.
std::string first_bytes_hex(std::span<const std::uint8_t> bytes, std::size_t n = 6);

// kInvalidArgument "<path>: <problem>".
[[nodiscard]] tl::unexpected<Error> bad_file(const std::string& path, const std::string& problem);

// `acc` *= `factor`; false (acc unspecified) when the product overflows std::size_t.
[[nodiscard]] inline bool multiply_checked(std::size_t& acc, std::uint64_t factor) {
    return !__builtin_mul_overflow(acc, factor, &acc);
}

// Checks an image shape (count >= 1 up to kMaxExamples; channels, height, width 1..kMaxImageSide)
// and that count * channels * height * width * element_bytes equals `payload_bytes`, the bytes the
// file holds after its header: fewer is "truncated", more is "trailing bytes".
[[nodiscard]] Result<void> check_image_payload(std::uint64_t count, std::uint64_t channels, std::uint64_t height,
                                               std::uint64_t width, std::size_t element_bytes,
                                               std::size_t payload_bytes, const std::string& path);

// The same for `count` labels of `element_bytes` each.
[[nodiscard]] Result<void> check_label_payload(std::uint64_t count, std::size_t element_bytes,
                                               std::size_t payload_bytes, const std::string& path);

}  // namespace psrun::worker
