#include "workerd/data/image_resize.h"

#include <algorithm>
#include <cmath>
#include <string>

namespace psrun::worker {
namespace {

// Source taps and normalized weights of each output pixel along one axis: output i samples
// around x0 + (i + 0.5) * scale with a triangle of half-width max(scale, 1).
struct Taps {
    std::vector<int> first;     // per output: index of its first source pixel
    std::vector<int> count;     // per output: number of taps
    std::vector<float> weight;  // per output: `stride` weights, count of them used
    int stride = 0;
};

Taps make_taps(double x0, double extent, int src_size, int out_size) {
    Taps t;
    const double scale = extent / out_size;
    const double support = std::max(scale, 1.0);
    t.stride = static_cast<int>(std::ceil(support)) * 2 + 2;
    t.first.resize(static_cast<std::size_t>(out_size));
    t.count.resize(static_cast<std::size_t>(out_size));
    t.weight.assign(static_cast<std::size_t>(out_size) * static_cast<std::size_t>(t.stride), 0.0f);
    for (int i = 0; i < out_size; ++i) {
        const double center = x0 + (i + 0.5) * scale;
        int lo = static_cast<int>(std::floor(center - support));
        int hi = static_cast<int>(std::ceil(center + support));
        lo = std::clamp(lo, 0, src_size - 1);
        hi = std::clamp(hi, lo + 1, src_size);
        hi = std::min(hi, lo + t.stride);
        double total = 0;
        float* w = &t.weight[static_cast<std::size_t>(i) * static_cast<std::size_t>(t.stride)];
        for (int s = lo; s < hi; ++s) {
            const double d = std::abs((s + 0.5 - center) / support);
            const double v = d < 1.0 ? 1.0 - d : 0.0;
            w[s - lo] = static_cast<float>(v);
            total += v;
        }
        if (total <= 0) {  // a sample between pixel centres at the edge: take the nearest
            const int nearest = std::clamp(static_cast<int>(center), 0, src_size - 1);
            lo = nearest;
            hi = nearest + 1;
            w[0] = 1.0f;
            total = 1.0;
        }
        for (int s = 0; s < hi - lo; ++s) w[s] = static_cast<float>(w[s] / total);
        t.first[static_cast<std::size_t>(i)] = lo;
        t.count[static_cast<std::size_t>(i)] = hi - lo;
    }
    return t;
}

std::uint8_t to_u8(float v) { return static_cast<std::uint8_t>(std::clamp(std::lround(v), 0L, 255L)); }

}  // namespace

Result<ResizeMode> parse_resize_mode(std::string_view text) {
    if (text == "crop") return ResizeMode::kCrop;
    if (text == "pad") return ResizeMode::kPad;
    if (text == "stretch") return ResizeMode::kStretch;
    return make_error(ErrorCode::kInvalidArgument,
                      "--image-resize '" + std::string(text) + "': expected crop, pad or stretch");
}

const char* to_string(ResizeMode mode) {
    switch (mode) {
        case ResizeMode::kCrop: return "crop";
        case ResizeMode::kPad: return "pad";
        case ResizeMode::kStretch: return "stretch";
    }
    return "?";
}

ResizePlan plan_resize(int w, int h, int out_w, int out_h, ResizeMode mode) {
    ResizePlan p{0, 0, double(w), double(h), 0, 0, out_w, out_h};
    if (mode == ResizeMode::kStretch || (w == out_w && h == out_h)) return p;
    const double sx = double(out_w) / w, sy = double(out_h) / h;
    if (mode == ResizeMode::kCrop) {
        const double s = std::max(sx, sy);  // the scaled image covers the target
        p.sw = std::min(double(w), out_w / s);
        p.sh = std::min(double(h), out_h / s);
        p.x0 = (w - p.sw) / 2;
        p.y0 = (h - p.sh) / 2;
        return p;
    }
    const double s = std::min(sx, sy);  // the scaled image fits inside the target
    p.dw = std::clamp(static_cast<int>(std::lround(w * s)), 1, out_w);
    p.dh = std::clamp(static_cast<int>(std::lround(h * s)), 1, out_h);
    p.dx = (out_w - p.dw) / 2;
    p.dy = (out_h - p.dh) / 2;
    return p;
}

void min_source_size(int w, int h, int out_w, int out_h, ResizeMode mode, int& min_w, int& min_h) {
    if (mode == ResizeMode::kStretch) {
        min_w = out_w;
        min_h = out_h;
        return;
    }
    const double sx = double(out_w) / w, sy = double(out_h) / h;
    const double s = mode == ResizeMode::kCrop ? std::max(sx, sy) : std::min(sx, sy);
    min_w = static_cast<int>(std::ceil(w * s - 1e-9));
    min_h = static_cast<int>(std::ceil(h * s - 1e-9));
}

void resize_to_chw(const HwcImage& src, int out_w, int out_h, ResizeMode mode, std::span<std::uint8_t> out,
                   std::vector<float>& scratch) {
    const std::size_t c = static_cast<std::size_t>(src.channels);
    const std::size_t plane = static_cast<std::size_t>(out_w) * static_cast<std::size_t>(out_h);
    if (src.width == out_w && src.height == out_h) {  // as stored: a transpose to CHW, no resampling
        const std::uint8_t* in = src.pixels;
        if (c == 1) {
            std::copy_n(in, plane, out.data());
        } else if (c == 3) {  // one pass with three outputs: the compiler vectorises it
            std::uint8_t* r = out.data();
            std::uint8_t* g = r + plane;
            std::uint8_t* b = g + plane;
            for (std::size_t p = 0; p < plane; ++p) {
                r[p] = in[3 * p];
                g[p] = in[3 * p + 1];
                b[p] = in[3 * p + 2];
            }
        } else {
            for (std::size_t p = 0; p < plane; ++p)
                for (std::size_t k = 0; k < c; ++k) out[k * plane + p] = in[p * c + k];
        }
        return;
    }
    const ResizePlan plan = plan_resize(src.width, src.height, out_w, out_h, mode);
    std::fill(out.begin(), out.end(), std::uint8_t{0});
    const Taps tx = make_taps(plan.x0, plan.sw, src.width, plan.dw);
    const Taps ty = make_taps(plan.y0, plan.sh, src.height, plan.dh);
    // Rows the vertical pass reads: only those, horizontally resampled, into scratch.
    const int row_lo = ty.first.front();
    const int row_hi = ty.first.back() + ty.count.back();
    const std::size_t dw = static_cast<std::size_t>(plan.dw);
    scratch.resize(static_cast<std::size_t>(row_hi - row_lo) * dw * c);
    for (int y = row_lo; y < row_hi; ++y) {
        const std::uint8_t* row = src.pixels + static_cast<std::size_t>(y) * static_cast<std::size_t>(src.width) * c;
        float* dst = scratch.data() + static_cast<std::size_t>(y - row_lo) * dw * c;
        for (std::size_t x = 0; x < dw; ++x) {
            const float* w = &tx.weight[x * static_cast<std::size_t>(tx.stride)];
            const std::size_t first = static_cast<std::size_t>(tx.first[x]);
            for (std::size_t k = 0; k < c; ++k) {
                float acc = 0;
                for (int t = 0; t < tx.count[x]; ++t) acc += w[t] * row[(first + static_cast<std::size_t>(t)) * c + k];
                dst[x * c + k] = acc;
            }
        }
    }
    for (int y = 0; y < plan.dh; ++y) {
        const float* w = &ty.weight[static_cast<std::size_t>(y) * static_cast<std::size_t>(ty.stride)];
        const int first = ty.first[static_cast<std::size_t>(y)] - row_lo;
        const std::size_t out_row = static_cast<std::size_t>(plan.dy + y) * static_cast<std::size_t>(out_w);
        for (std::size_t x = 0; x < dw; ++x) {
            for (std::size_t k = 0; k < c; ++k) {
                float acc = 0;
                for (int t = 0; t < ty.count[static_cast<std::size_t>(y)]; ++t)
                    acc += w[t] * scratch[(static_cast<std::size_t>(first + t) * dw + x) * c + k];
                out[k * plane + out_row + static_cast<std::size_t>(plan.dx) + x] = to_u8(acc);
            }
        }
    }
}

}  // namespace psrun::worker
