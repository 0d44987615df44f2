#include "common/crc32c.h"

#include <array>

#if defined(__SSE4_2__)
#include <nmmintrin.h>
#endif

namespace psrun {
namespace {

constexpr std::array<std::uint32_t, 256> make_table() {
    std::array<std::uint32_t, 256> table{};
    for (std::uint32_t i = 0; i < 256; ++i) {
        std::uint32_t c = i;
        for (int k = 0; k < 8; ++k) c = (c & 1) ? (c >> 1) ^ 0x82f63b78u : c >> 1;
        table[i] = c;
    }
    return table;
}

constexpr auto kTable = make_table();

}  // namespace

std::uint32_t crc32c_extend(std::uint32_t crc, std::span<const std::byte> data) {
    std::uint32_t c = ~crc;
    std::size_t i = 0;
#if defined(__SSE4_2__)
    // The hardware instruction does ~8 bytes per cycle: checkpoints CRC 13 MB per save.
    std::uint64_t c64 = c;
    for (; i + 8 <= data.size(); i += 8) {
        std::uint64_t word;
        __builtin_memcpy(&word, data.data() + i, 8);
        c64 = _mm_crc32_u64(c64, word);
    }
    c = static_cast<std::uint32_t>(c64);
#endif
    for (; i < data.size(); ++i) c = kTable[(c ^ static_cast<std::uint8_t>(data[i])) & 0xff] ^ (c >> 8);
    return ~c;
}

}  // namespace psrun
