#include "workerd/data/batch_fill.h"

#include <algorithm>
#include <cassert>

namespace psrun::worker {
namespace {

// Per channel, (v - mean) * (1 / std), where v is pixel / 255 for uint8 and the stored value
// for float32.
void fill_general(const LabeledImages& data, std::span<const std::uint32_t> indices, std::span<float> images) {
    const ImageArray& a = data.images;
    const std::size_t channels = static_cast<std::size_t>(a.channels);
    const std::size_t plane = static_cast<std::size_t>(a.height) * static_cast<std::size_t>(a.width);
    const std::size_t pixels = channels * plane;
    const Normalization& n = data.normalization;
    const bool is_u8 = a.type == PixelType::kUint8;
    for (std::size_t b = 0; b < indices.size(); ++b) {
        const std::size_t base = indices[b] * pixels;
        float* dst = images.data() + b * pixels;
        for (std::size_t c = 0; c < channels; ++c) {
            const std::size_t k = n.mean.size() == 1 ? 0 : c;
            const float mean = n.empty() ? 0.0f : n.mean[k];
            const float inv_std = n.empty() ? 1.0f : 1.0f / n.std[k];
            float* out = dst + c * plane;
            if (is_u8) {
                constexpr float kScale = 1.0f / 255.0f;
                const std::uint8_t* src = a.u8.data() + base + c * plane;
                for (std::size_t p = 0; p < plane; ++p) out[p] = (static_cast<float>(src[p]) * kScale - mean) * inv_std;
            } else {
                const float* src = a.f32.data() + base + c * plane;
                for (std::size_t p = 0; p < plane; ++p) out[p] = (src[p] - mean) * inv_std;
            }
        }
    }
}

void fill_inputs(const LabeledImages& data, std::span<const std::uint32_t> indices, std::span<float> images) {
    const ImageArray& a = data.images;
    const std::size_t pixels = a.example_size();
    assert(images.size() == indices.size() * pixels);
    if (a.type == PixelType::kUint8 && data.normalization.empty()) {
        // The MNIST path: exactly the floats it always produced.
        constexpr float kScale = 1.0f / 255.0f;
        for (std::size_t b = 0; b < indices.size(); ++b) {
            const std::uint8_t* src = a.u8.data() + indices[b] * pixels;
            float* dst = images.data() + b * pixels;
            for (std::size_t p = 0; p < pixels; ++p) dst[p] = static_cast<float>(src[p]) * kScale;
        }
        return;
    }
    fill_general(data, indices, images);
}

}  // namespace

void fill_batch(const LabeledImages& data, std::span<const std::uint32_t> indices, std::span<float> images,
                std::span<std::int32_t> labels) {
    assert(labels.size() == indices.size());
    for (std::size_t b = 0; b < indices.size(); ++b) labels[b] = data.labels[indices[b]];
    fill_inputs(data, indices, images);
}

void fill_examples(const LabeledImages& data, std::span<const std::uint32_t> indices, const BatchView& out) {
    if (data.input == InputKind::kTokens) {
        const std::size_t l = data.token_length;
        if (!out.inputs_i32.empty()) {
            assert(out.inputs_i32.size() == indices.size() * l);
            for (std::size_t b = 0; b < indices.size(); ++b)
                std::copy_n(data.tokens.data() + indices[b] * l, l, out.inputs_i32.data() + b * l);
        }
    } else if (!out.inputs_f32.empty()) {
        fill_inputs(data, indices, out.inputs_f32);
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
}

}  // namespace psrun::worker
