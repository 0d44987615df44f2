#include "workerd/global_norm.h"

#include <cmath>
#include <cstdint>

namespace psrun::worker {

GlobalNorm clip_by_global_norm(std::span<const std::span<float>> pieces, double limit) {
    double sum = 0;
    for (const auto piece : pieces) {
        const float* p = piece.data();
        const auto n = static_cast<std::int64_t>(piece.size());
#pragma omp parallel for reduction(+ : sum) schedule(static) if (n >= (1 << 16))
        for (std::int64_t i = 0; i < n; ++i) sum += double(p[i]) * double(p[i]);
    }
    GlobalNorm result{std::sqrt(sum), false};
    if (!std::isfinite(result.norm) || result.norm <= limit) return result;
    const auto scale = static_cast<float>(limit / result.norm);
    for (const auto piece : pieces)
        for (float& v : piece) v *= scale;
    result.clipped = true;
    return result;
}

}  // namespace psrun::worker
