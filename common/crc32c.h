// CRC-32C (Castagnoli), as used by TFRecord framing and psrun checkpoints.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace psrun {

// Extends `crc` (0 to start) over `data`. Thread-safe.
std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::byte> data);

inline std::uint32_t crc32c(std::span<const std::byte> data) { return crc32c_extend(0, data); }

// TFRecord's masked CRC: rotate right by 15 and add a constant, so that a CRC stored inside
// CRC-protected data does not make the outer CRC degenerate.
inline std::uint32_t crc32c_mask(std::uint32_t crc) { return ((crc >> 15) | (crc << 17)) + 0xa282ead8u; }

}  // namespace psrun
