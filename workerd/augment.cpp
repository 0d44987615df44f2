#include "workerd/augment.h"

#include <omp.h>

#include <algorithm>
#include <cstring>

#include "common/rng.h"

namespace psrun::worker {

Result<AugmentSpec> parse_augment(const std::string& text) {
    AugmentSpec spec;
    if (text.empty() || text == "none") return spec;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        const std::string part = text.substr(start, comma - start);
        if (part == "flip") {
            spec.flip = true;
        } else if (part.rfind("crop=", 0) == 0 && part.size() > 5 && part.size() <= 7 &&
                   std::all_of(part.begin() + 5, part.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
                   std::stoi(part.substr(5)) >= 1 && std::stoi(part.substr(5)) <= 64) {
            spec.crop_padding = std::stoi(part.substr(5));
        } else {
            return make_error(
                ErrorCode::kInvalidArgument,
                "--augment " + text + ": '" + part +
                    "' is not flip or crop=P (P the padding in pixels, 1..64); e.g. --augment flip,crop=4");
        }
        start = comma + 1;
    }
    return spec;
}

Augmenter::Augmenter(AugmentSpec spec, std::uint64_t seed, std::uint32_t worker)
    : spec_(spec), seed_(seed ^ (0xA5A5F00DULL * (static_cast<std::uint64_t>(worker) + 1))) {}

void Augmenter::apply(std::span<float> images, std::int64_t examples, std::int64_t channels, std::int64_t height,
                      std::int64_t width, std::uint64_t step) {
    if (!spec_.enabled()) return;
    const std::int64_t plane = height * width, image = channels * plane;
    scratch_.resize(static_cast<std::size_t>(image * std::max(1, omp_get_max_threads())));
    const int p = spec_.crop_padding;
#pragma omp parallel for schedule(static)
    for (std::int64_t e = 0; e < examples; ++e) {
        Rng rng(seed_ ^ (step * 0x9E3779B97F4A7C15ULL), static_cast<std::uint64_t>(e));  // per (step, example)
        const auto dy = p > 0 ? static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(2 * p + 1))) - p : 0;
        const auto dx = p > 0 ? static_cast<std::int64_t>(rng.below(static_cast<std::uint64_t>(2 * p + 1))) - p : 0;
        const bool flip = spec_.flip && (rng.next() & 1) != 0;
        if (dy == 0 && dx == 0 && !flip) continue;
        float* img = images.data() + e * image;
        float* copy = scratch_.data() + static_cast<std::int64_t>(omp_get_thread_num()) * image;
        std::memcpy(copy, img, static_cast<std::size_t>(image) * sizeof(float));
        for (std::int64_t c = 0; c < channels; ++c)
            for (std::int64_t y = 0; y < height; ++y) {
                float* row = img + c * plane + y * width;
                const std::int64_t sy = y + dy;
                if (sy < 0 || sy >= height) {
                    std::fill_n(row, width, 0.0f);
                    continue;
                }
                const float* src = copy + c * plane + sy * width;
                for (std::int64_t x = 0; x < width; ++x) {
                    const std::int64_t sx = (flip ? width - 1 - x : x) + dx;
                    row[x] = sx >= 0 && sx < width ? src[sx] : 0.0f;
                }
            }
    }
}

}  // namespace psrun::worker
