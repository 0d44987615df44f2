#include "workerd/data/synthetic_images.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <string>

#include "common/rng.h"

namespace psrun::worker {

Result<ImageShape> parse_image_shape(std::string_view text) {
    ImageShape s;
    int* fields[] = {&s.channels, &s.height, &s.width};
    std::size_t pos = 0;
    for (int i = 0; i < 3; ++i) {
        const std::size_t x = i < 2 ? text.find('x', pos) : text.size();
        if (x == std::string_view::npos) break;
        const auto item = text.substr(pos, x - pos);
        const auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), *fields[i]);
        if (ec != std::errc() || p != item.data() + item.size()) break;
        pos = x + 1;
        if (i == 2 && (s.channels == 1 || s.channels == 3) && s.height >= 1 && s.height <= 4096 && s.width >= 1 &&
            s.width <= 4096)
            return s;
    }
    return make_error(
        ErrorCode::kInvalidArgument,
        "--shape '" + std::string(text) + "': expected CxHxW with C 1 or 3 and sides 1-4096, e.g. 3x64x64");
}

std::vector<std::uint8_t> synthetic_image(const ImageShape& shape, int label, std::uint64_t seed, std::uint64_t index) {
    const int w = shape.width, h = shape.height, c = shape.channels;
    std::vector<float> img(static_cast<std::size_t>(w * h * c));
    // The class's gradient: a direction and a colour from the label.
    const double angle = 0.6283185307179586 * label;
    const double dx = std::cos(angle), dy = std::sin(angle);
    for (int y = 0; y < h; ++y)
        for (int x = 0; x < w; ++x) {
            const double t = ((x - w / 2.0) * dx + (y - h / 2.0) * dy) / std::max(w, h);
            for (int k = 0; k < c; ++k)
                img[static_cast<std::size_t>((y * w + x) * c + k)] =
                    static_cast<float>(128 + 90 * t * (k == label % 3 ? 1.0 : -0.5) + 10 * k);
        }
    Rng rng(seed, index);
    for (int b = 0; b < 4; ++b) {  // blobs of random colour and size
        const double cx = rng.uniform() * w, cy = rng.uniform() * h, r = (0.05 + 0.2 * rng.uniform()) * std::max(w, h);
        float colour[3];
        for (auto& v : colour) v = static_cast<float>(255 * rng.uniform());
        for (int y = 0; y < h; ++y)
            for (int x = 0; x < w; ++x) {
                const double d2 = ((x - cx) * (x - cx) + (y - cy) * (y - cy)) / (r * r);
                if (d2 >= 1) continue;
                const float a = static_cast<float>(0.6 * (1 - d2));
                for (int k = 0; k < c; ++k) {
                    float& v = img[static_cast<std::size_t>((y * w + x) * c + k)];
                    v = (1 - a) * v + a * colour[k];
                }
            }
    }
    std::vector<std::uint8_t> out(img.size());
    for (std::size_t i = 0; i < img.size(); ++i)
        out[i] = static_cast<std::uint8_t>(
            std::clamp(img[i] + static_cast<float>(40 * (rng.uniform() - 0.5)), 0.0f, 255.0f));
    return out;
}

}  // namespace psrun::worker
