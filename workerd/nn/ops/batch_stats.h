// A batch norm's per-channel batch statistics in double (batch_norm_kernel.cpp hands them to
// oneDNN; its own f32 sums are too coarse: see there), read in place in the layouts oneDNN
// gives a batch norm's input. Internal to the batch_norm kernel.
#pragma once

#include <cstdint>
#include <optional>

#include <dnnl.hpp>

namespace psrun::nn::batch_norm {

// Where a batch norm's input keeps channel c of example n at (flattened) spatial index s:
//   offset0 + n * n_stride + (c / lanes) * group_stride + s * s_stride + c % lanes,
// lanes channels side by side (nChw8c: 8; nhwc: all C; nchw: 1). Padding channels (c >= C
// in a last block) are read and ignored.
struct ChannelLayout {
    std::int64_t n = 1, c = 1, s = 1;
    std::int64_t lanes = 1, groups = 1;
    std::int64_t n_stride = 0, group_stride = 0, s_stride = 0, offset0 = 0;
};

// The layout of `md` (f32 or bf16), or nothing for formats it does not describe (blocks
// over N or the spatial dims, or spatial dims that do not flatten into one stride).
std::optional<ChannelLayout> channel_layout(const dnnl::memory::desc& md);

// The batch's per-channel mean and population variance of x (f32, or bf16 as uint16_t) into
// mean[c] and var[c]: per (example, channel group) the sums of d = x - k[c] and d^2 in double
// (k[c]: channel c's first value, so that E[d^2] - E[d]^2 does not cancel), OpenMP over the
// (example, group) pairs, then added per channel in a fixed order (deterministic). Scratch:
// `part` holds 2 x lanes doubles per (example, group) pair, `shift` lanes x groups floats.
void batch_stats(const ChannelLayout& l, const float* x, double* part, float* shift, float* mean, float* var);
void batch_stats(const ChannelLayout& l, const std::uint16_t* x, double* part, float* shift, float* mean, float* var);

}  // namespace psrun::nn::batch_norm
