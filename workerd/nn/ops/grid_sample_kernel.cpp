// The grid_sample kernel: hand loops in f32 on plain layouts (oneDNN 2.6 has no such primitive),
// following torch's CPU grid sampler: a grid coordinate g in [-1, 1] becomes a pixel position
// ((g + 1) / 2 (size - 1) with align_corners, ((g + 1) size - 1) / 2 without), then is
// reflected and/or clipped to the image for the reflection and border modes (the derivative of
// that map, 0 where clipped, +-1 elsewhere, times the unnormalising scale, is kept for the grid's
// gradient). Bilinear reads the four neighbours (those outside the image read 0); nearest the
// pixel at the position rounded half to even.
// Forward: one task per (example, output row), every channel. Backward: one task per example:
// dX scattered from dY with the forward's weights, dGrid summed over the channels.
#include <cmath>
#include <cstdint>
#include <memory>
#include <string>

#include "workerd/nn/kernel.h"
#include "workerd/nn/ops/kernel_views.h"
#include "workerd/nn/ops/ops.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

enum class GridPadding { kZeros, kBorder, kReflection };

struct GridGeometry {
    std::int64_t n = 0, c = 0, h = 0, w = 0, oh = 0, ow = 0;
    bool bilinear = true, align = false;
    GridPadding padding = GridPadding::kZeros;
};

// A pixel position along an axis of `size` pixels, and d(position)/d(grid coordinate).
struct GridCoordinate {
    float at = 0.0f;
    float slope = 0.0f;
};

// `v` reflected into [low2 / 2, high2 / 2] (bounds doubled, as torch keeps them); `flip` becomes
// -1 where an odd number of reflections turned the direction.
float reflect_coordinate(float v, std::int64_t low2, std::int64_t high2, float& flip) {
    flip = 1.0f;
    if (low2 == high2) {
        flip = 0.0f;
        return 0.0f;
    }
    const float low = static_cast<float>(low2) / 2.0f, span = static_cast<float>(high2 - low2) / 2.0f;
    float d = v - low;
    if (d < 0) {
        flip = -1.0f;
        d = -d;
    }
    const float extra = std::fmod(d, span);
    if (std::fmod(std::floor(d / span), 2.0f) == 0.0f) return extra + low;  // an even number of flips
    flip = -flip;
    return span - extra + low;
}

// Clipped to [0, size - 1]; the slope becomes 0 where it was clipped.
float clip_coordinate(float v, std::int64_t size, float& slope) {
    if (v <= 0.0f) {
        slope = 0.0f;
        return 0.0f;
    }
    const auto top = static_cast<float>(size - 1);
    if (v >= top) {
        slope = 0.0f;
        return top;
    }
    return v;
}

GridCoordinate grid_source(float g, std::int64_t size, const GridGeometry& geo) {
    GridCoordinate c;
    if (geo.align) {
        c.slope = static_cast<float>(size - 1) / 2.0f;
        c.at = (g + 1.0f) * c.slope;
    } else {
        c.slope = static_cast<float>(size) / 2.0f;
        c.at = ((g + 1.0f) * static_cast<float>(size) - 1.0f) / 2.0f;
    }
    if (!std::isfinite(c.at)) {  // NaN or Inf (a diverged grid): outside, reads zeros, no gradient
        c.at = -2.0f;
        c.slope = 0.0f;
        return c;
    }
    if (geo.padding == GridPadding::kReflection) {
        float flip = 1.0f;
        c.at = geo.align ? reflect_coordinate(c.at, 0, 2 * (size - 1), flip)
                         : reflect_coordinate(c.at, -1, 2 * size - 1, flip);
        c.slope *= flip;
    }
    if (geo.padding != GridPadding::kZeros) {
        float kept = 1.0f;
        c.at = clip_coordinate(c.at, size, kept);
        c.slope *= kept;
    }
    return c;
}

// The (up to) four neighbours of a point and their weights; a neighbour outside the image has
// index -1 (it reads 0 and receives nothing).
struct GridTaps {
    std::int64_t index[4] = {-1, -1, -1, -1};  // nw, ne, sw, se: offsets in an H x W plane
    float weight[4] = {0, 0, 0, 0};
    float x = 0, y = 0, x0 = 0, y0 = 0;  // the position and its floor
};

GridTaps grid_taps(float x, float y, const GridGeometry& geo) {
    GridTaps t;
    // Far outside (zeros padding leaves positions unclipped): no neighbour, and no float too
    // large for an index.
    if (!(x > -2.0f && y > -2.0f && x < static_cast<float>(geo.w) + 1.0f && y < static_cast<float>(geo.h) + 1.0f))
        return t;
    t.x = x;
    t.y = y;
    if (!geo.bilinear) {
        const auto ix = static_cast<std::int64_t>(std::nearbyint(x)), iy = static_cast<std::int64_t>(std::nearbyint(y));
        if (ix >= 0 && ix < geo.w && iy >= 0 && iy < geo.h) {
            t.index[0] = iy * geo.w + ix;
            t.weight[0] = 1.0f;
        }
        return t;
    }
    t.x0 = std::floor(x);
    t.y0 = std::floor(y);
    const auto ix = static_cast<std::int64_t>(t.x0), iy = static_cast<std::int64_t>(t.y0);
    const float fx = x - t.x0, fy = y - t.y0;
    const std::int64_t xs[4] = {ix, ix + 1, ix, ix + 1}, ys[4] = {iy, iy, iy + 1, iy + 1};
    const float ws[4] = {(1 - fx) * (1 - fy), fx * (1 - fy), (1 - fx) * fy, fx * fy};
    for (int k = 0; k < 4; ++k) {
        if (xs[k] < 0 || xs[k] >= geo.w || ys[k] < 0 || ys[k] >= geo.h) continue;
        t.index[k] = ys[k] * geo.w + xs[k];
        t.weight[k] = ws[k];
    }
    return t;
}

void grid_sample_forward(const float* x, const float* grid, float* y, const GridGeometry& g) {
    const std::int64_t plane = g.h * g.w, out_plane = g.oh * g.ow;
#pragma omp parallel for collapse(2) schedule(static)
    for (std::int64_t n = 0; n < g.n; ++n)
        for (std::int64_t i = 0; i < g.oh; ++i)
            for (std::int64_t j = 0; j < g.ow; ++j) {
                const float* point = grid + ((n * g.oh + i) * g.ow + j) * 2;
                const GridTaps t = grid_taps(grid_source(point[0], g.w, g).at, grid_source(point[1], g.h, g).at, g);
                for (std::int64_t c = 0; c < g.c; ++c) {
                    const float* image = x + (n * g.c + c) * plane;
                    float v = 0.0f;
                    for (int k = 0; k < 4; ++k)
                        if (t.index[k] >= 0) v += t.weight[k] * image[t.index[k]];
                    y[(n * g.c + c) * out_plane + i * g.ow + j] = v;
                }
            }
}

// dx (may be null) = the scatter of dy; dgrid (may be null) = dy's derivative along the grid.
void grid_sample_backward(const float* x, const float* grid, const float* dy, float* dx, float* dgrid,
                          const GridGeometry& g) {
    const std::int64_t plane = g.h * g.w, out_plane = g.oh * g.ow;
#pragma omp parallel for schedule(static)
    for (std::int64_t n = 0; n < g.n; ++n) {
        if (dx != nullptr)
            for (std::int64_t e = 0; e < g.c * plane; ++e) dx[n * g.c * plane + e] = 0.0f;
        for (std::int64_t p = 0; p < out_plane; ++p) {
            const float* point = grid + (n * out_plane + p) * 2;
            const GridCoordinate cx = grid_source(point[0], g.w, g), cy = grid_source(point[1], g.h, g);
            const GridTaps t = grid_taps(cx.at, cy.at, g);
            float gx = 0.0f, gy = 0.0f;
            for (std::int64_t c = 0; c < g.c; ++c) {
                const float d = dy[(n * g.c + c) * out_plane + p];
                if (dx != nullptr) {
                    float* image = dx + (n * g.c + c) * plane;
                    for (int k = 0; k < 4; ++k)
                        if (t.index[k] >= 0) image[t.index[k]] += t.weight[k] * d;
                }
                if (dgrid == nullptr || !g.bilinear) continue;
                const float* image = x + (n * g.c + c) * plane;
                float v[4];
                for (int k = 0; k < 4; ++k) v[k] = t.index[k] >= 0 ? image[t.index[k]] : 0.0f;
                const float fx = t.x - t.x0, fy = t.y - t.y0;
                gx += d * ((v[1] - v[0]) * (1 - fy) + (v[3] - v[2]) * fy);
                gy += d * ((v[2] - v[0]) * (1 - fx) + (v[3] - v[1]) * fx);
            }
            if (dgrid != nullptr) {
                dgrid[(n * out_plane + p) * 2] = gx * cx.slope;
                dgrid[(n * out_plane + p) * 2 + 1] = gy * cy.slope;
            }
        }
    }
}

class GridSampleKernel final : public Kernel {
  public:
    // The backward reads the grid (for either gradient) and the image (for the grid's only).
    BackwardReads backward_reads(const std::vector<const Node*>&, const EngineContext&) const override {
        BackwardReads reads{0b11, false, -1};
        reads.as_converted = 0b11;
        reads.input_for[0] = 0b10;
        return reads;
    }

    std::string label_suffix() const override { return " [hand]"; }

    void build(KernelBuilder& b) override {
        const auto& engine = b.context().engine;
        const auto& attrs = b.node().attrs;
        const MemDims in = b.input_dims(0), grid_dims = b.input_dims(1);
        GridGeometry g;
        g.n = in[0];
        g.c = in[1];
        g.h = in[2];
        g.w = in[3];
        g.oh = grid_dims[1];
        g.ow = grid_dims[2];
        g.bilinear = attrs.at("mode").get<std::string>() == "bilinear";
        g.align = attrs.at("align_corners").get<bool>();
        const std::string padding = attrs.at("padding_mode").get<std::string>();
        g.padding = padding == "border"       ? GridPadding::kBorder
                    : padding == "reflection" ? GridPadding::kReflection
                                              : GridPadding::kZeros;
        const memory x = b.input_plain(0, Dt::f32);
        const memory grid = b.input_plain(1, Dt::f32);
        const MemDims out_dims = b.output_dims(0);
        const Dt out_type = b.output_type(0);
        const memory::desc f32 = plain_desc(out_dims, Dt::f32);
        const memory y = out_type == Dt::f32 ? b.make_output(0, f32) : memory(f32, engine);
        b.forward([x, grid, y, g] {
            grid_sample_forward(static_cast<const float*>(x.get_data_handle()),
                                static_cast<const float*>(grid.get_data_handle()),
                                static_cast<float*>(y.get_data_handle()), g);
        });
        if (out_type != Dt::f32) b.forward(run_reorder(b, y, b.make_output(0, plain_desc(out_dims, out_type))));
        b.note(std::string("fwd: hand grid_sample, ") + (g.bilinear ? "bilinear" : "nearest") + ", " + padding);
        const bool image_grad = b.needs_input_grad(0), grid_grad = b.needs_input_grad(1);
        if (!image_grad && !grid_grad) return;
        const memory dy = b.output_diff(0, f32);
        const memory dx = image_grad ? b.input_diff(0, plain_desc(in, Dt::f32)) : memory();
        const memory dgrid = grid_grad ? b.input_diff(1, plain_desc(grid_dims, Dt::f32)) : memory();
        b.backward([x, grid, dy, dx, dgrid, g] {
            float* dgrid_data = dgrid ? static_cast<float*>(dgrid.get_data_handle()) : nullptr;
            if (dgrid_data != nullptr && !g.bilinear)  // nearest: the grid's gradient is zero (torch's)
                for (std::int64_t e = 0; e < g.n * g.oh * g.ow * 2; ++e) dgrid_data[e] = 0.0f;
            grid_sample_backward(
                static_cast<const float*>(x.get_data_handle()), static_cast<const float*>(grid.get_data_handle()),
                static_cast<const float*>(dy.get_data_handle()),
                dx ? static_cast<float*>(dx.get_data_handle()) : nullptr, g.bilinear ? dgrid_data : nullptr, g);
        });
    }
};

}  // namespace

std::unique_ptr<Kernel> make_grid_sample_kernel() { return std::make_unique<GridSampleKernel>(); }

}  // namespace psrun::nn
