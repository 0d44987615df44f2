#include "workerd/data/batch_fill.h"

#include <algorithm>
#include <cassert>

namespace psrun::worker {
namespace {

PixelRows rows_of(const ImageArray& a) {
    return {a.type,
            a.u8.data(),
            a.f32.data(),
            static_cast<std::size_t>(a.channels),
            static_cast<std::size_t>(a.height) * static_cast<std::size_t>(a.width),
            false};
}

}  // namespace

void fill_pixels(const PixelRows& r, const Normalization& n, std::span<const std::uint32_t> indices,
                 std::span<float> out) {
    const std::size_t pixels = r.channels * r.plane;
    assert(out.size() == indices.size() * pixels);
    constexpr float kScale = 1.0f / 255.0f;
    if (r.type == PixelType::kUint8 && n.empty() && !r.nhwc) {
        // The MNIST path: exactly the floats it always produced.
        for (std::size_t b = 0; b < indices.size(); ++b) {
            const std::uint8_t* src = r.u8 + indices[b] * pixels;
            float* dst = out.data() + b * pixels;
            for (std::size_t p = 0; p < pixels; ++p) dst[p] = static_cast<float>(src[p]) * kScale;
        }
        return;
    }
    // Per channel, (v - mean) * (1 / std), where v is pixel / 255 for uint8 and the stored value
    // for float32.
    const bool is_u8 = r.type == PixelType::kUint8;
    for (std::size_t b = 0; b < indices.size(); ++b) {
        const std::size_t base = indices[b] * pixels;
        float* dst = out.data() + b * pixels;
        for (std::size_t c = 0; c < r.channels; ++c) {
            const std::size_t k = n.mean.size() == 1 ? 0 : c;
            const float mean = n.empty() ? 0.0f : n.mean[k];
            const float inv_std = n.empty() ? 1.0f : 1.0f / n.std[k];
            float* o = dst + c * r.plane;
            // Element p of channel c: at c * plane + p (CHW) or p * channels + c (HWC).
            const std::size_t first = r.nhwc ? c : c * r.plane, step = r.nhwc ? r.channels : 1;
            if (is_u8) {
                const std::uint8_t* src = r.u8 + base + first;
                for (std::size_t p = 0; p < r.plane; ++p)
                    o[p] = (static_cast<float>(src[p * step]) * kScale - mean) * inv_std;
            } else {
                const float* src = r.f32 + base + first;
                for (std::size_t p = 0; p < r.plane; ++p) o[p] = (src[p * step] - mean) * inv_std;
            }
        }
    }
}

void fill_batch(const LabeledImages& data, std::span<const std::uint32_t> indices, std::span<float> images,
                std::span<std::int32_t> labels) {
    assert(labels.size() == indices.size());
    for (std::size_t b = 0; b < indices.size(); ++b) labels[b] = data.labels[indices[b]];
    fill_pixels(rows_of(data.images), data.normalization, indices, images);
}

void fill_examples(const LabeledImages& data, std::span<const std::uint32_t> indices, const BatchView& out) {
    if (data.input == InputKind::kTokens) {
        const std::size_t l = data.token_length;
        if (!data.raw_tokens.empty()) {  // a table keyed by raw ids maps them into inputs_i32
            assert(out.inputs_u64.size() == indices.size() * l);
            for (std::size_t b = 0; b < indices.size(); ++b)
                std::copy_n(data.raw_tokens.data() + indices[b] * l, l, out.inputs_u64.data() + b * l);
        } else if (!out.inputs_i32.empty()) {
            assert(out.inputs_i32.size() == indices.size() * l);
            for (std::size_t b = 0; b < indices.size(); ++b)
                std::copy_n(data.tokens.data() + indices[b] * l, l, out.inputs_i32.data() + b * l);
        }
    } else if (!out.inputs_f32.empty()) {
        fill_pixels(rows_of(data.images), data.normalization, indices, out.inputs_f32);
    }
    if (data.target == TargetKind::kVector) {
        const std::size_t t = data.target_length;
        if (!out.targets.empty()) {
            assert(out.targets.size() == indices.size() * t);
            for (std::size_t b = 0; b < indices.size(); ++b)
                std::copy_n(data.targets.data() + indices[b] * t, t, out.targets.data() + b * t);
        }
    } else if (!out.labels.empty()) {
        assert(out.labels.size() == indices.size());
        for (std::size_t b = 0; b < indices.size(); ++b) out.labels[b] = data.labels[indices[b]];
    }
    for (std::size_t k = 0; k < data.columns.size() && k < out.columns.size(); ++k) {
        const InputColumn& c = data.columns[k];
        const ColumnSpan& o = out.columns[k];
        const std::size_t m = c.per_example;
        if (!c.f32.empty() && o.f32.size() == indices.size() * m)
            for (std::size_t b = 0; b < indices.size(); ++b)
                std::copy_n(c.f32.data() + indices[b] * m, m, o.f32.data() + b * m);
        if (!c.i32.empty() && o.i32.size() == indices.size() * m)
            for (std::size_t b = 0; b < indices.size(); ++b)
                std::copy_n(c.i32.data() + indices[b] * m, m, o.i32.data() + b * m);
        if (!c.u64.empty() && o.u64.size() == indices.size() * m)
            for (std::size_t b = 0; b < indices.size(); ++b)
                std::copy_n(c.u64.data() + indices[b] * m, m, o.u64.data() + b * m);
    }
}

}  // namespace psrun::worker
