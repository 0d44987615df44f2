#include "common/finite.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

namespace psrun {

bool all_finite(const void* data, std::size_t count) {
    // |x| as bits is below 0x7F800000 exactly when x is finite: a max-reduction that GCC
    // vectorises (checked per 64 KiB block so that a bad value stops the scan early).
    const auto* bytes = static_cast<const unsigned char*>(data);
    constexpr std::size_t kBlock = 16384;
    for (std::size_t start = 0; start < count; start += kBlock) {
        const std::size_t end = std::min(count, start + kBlock);
        std::uint32_t max_bits = 0;
        for (std::size_t i = start; i < end; ++i) {
            std::uint32_t v;
            std::memcpy(&v, bytes + 4 * i, 4);
            max_bits = std::max(max_bits, v & 0x7FFFFFFFu);
        }
        if (max_bits >= 0x7F800000u) return false;
    }
    return true;
}

}  // namespace psrun
