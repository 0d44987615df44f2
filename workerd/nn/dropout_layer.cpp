#include "workerd/nn/dropout_layer.h"

#include <cstring>

#include "workerd/rng.h"

namespace psrun::nn {

using namespace dnnl;
using Dt = memory::data_type;

namespace {

float load(const float* p, std::size_t i) { return p[i]; }
float load(const std::uint16_t* p, std::size_t i) {
    const std::uint32_t u = std::uint32_t{p[i]} << 16;
    float f;
    std::memcpy(&f, &u, sizeof f);
    return f;
}
void store(float* p, std::size_t i, float v) { p[i] = v; }
void store(std::uint16_t* p, std::size_t i, float v) {  // round to nearest even
    std::uint32_t u;
    std::memcpy(&u, &v, sizeof u);
    u += 0x7fffu + ((u >> 16) & 1u);
    p[i] = static_cast<std::uint16_t>(u >> 16);
}

template <class T>
void masked_scale(const T* in, T* out, std::size_t count, std::uint64_t base, double keep) {
    const float scale = static_cast<float>(1.0 / keep);
    // Keep iff a 32-bit uniform < keep * 2^32; 64 random bits give two elements' masks.
    const auto threshold = static_cast<std::uint64_t>(keep * 4294967296.0);
    const std::size_t pairs = (count + 1) / 2;
#pragma omp parallel for schedule(static)
    for (std::size_t j = 0; j < pairs; ++j) {
        std::uint64_t r = base + (j + 1) * 0x9E3779B97F4A7C15ull;
        r = (r ^ (r >> 30)) * 0xBF58476D1CE4E5B9ull;
        r = (r ^ (r >> 27)) * 0x94D049BB133111EBull;
        r ^= r >> 31;
        store(out, 2 * j, (r & 0xffffffffull) < threshold ? load(in, 2 * j) * scale : 0.0f);
        if (2 * j + 1 < count) store(out, 2 * j + 1, (r >> 32) < threshold ? load(in, 2 * j + 1) * scale : 0.0f);
    }
}

}  // namespace

DropoutLayer::DropoutLayer(std::span<const LayerSpec> specs, int index, const LayerContext& context,
                           std::size_t param_offset, int ordinal)
    : Layer(specs, index, context, param_offset), ordinal_(ordinal) {}

void DropoutLayer::build(const memory& src, const memory& diff_src) {
    src_ = src;
    diff_src_ = diff_src;
    if (src.get_desc().data_type() != ctx_.activation_type()) {
        const auto dims = src.get_desc().dims();
        src_ = convert(fwd_ops_, src, md(dims, ctx_.activation_type(), plain_tag(static_cast<int>(dims.size()))));
        // The gradient in the activation type, then converted into the caller's buffer.
        if (diff_src) diff_src_ = produce_into(bwd_ops_, diff_src, src_.get_desc());
    }
    allocate_output(src_.get_desc());
}

void DropoutLayer::apply(const memory& in, const memory& out, bool masked) const {
    const std::size_t bytes = in.get_desc().get_size();
    if (!masked) {
        std::memcpy(out.get_data_handle(), in.get_data_handle(), bytes);
        return;
    }
    const std::uint64_t base = worker::Rng(seed_, 0x64726f70ull + static_cast<std::uint64_t>(ordinal_)).next();
    const double keep = spec().keep_prob;
    if (in.get_desc().data_type() == Dt::bf16) {
        masked_scale(static_cast<const std::uint16_t*>(in.get_data_handle()),
                     static_cast<std::uint16_t*>(out.get_data_handle()), bytes / 2, base, keep);
    } else {
        masked_scale(static_cast<const float*>(in.get_data_handle()),
                     static_cast<float*>(out.get_data_handle()), bytes / 4, base, keep);
    }
}

void DropoutLayer::forward(bool training) {
    for (const auto& op : fwd_ops_) op();  // input conversion, if any
    last_training_ = training && spec().keep_prob < 1.0;
    apply(src_, dst_, last_training_);
}

void DropoutLayer::backward() {
    if (!diff_src_) return;
    apply(diff_dst_, diff_src_, last_training_);
    for (const auto& op : bwd_ops_) op();  // conversion back to the input's type, if any
}

}  // namespace psrun::nn
