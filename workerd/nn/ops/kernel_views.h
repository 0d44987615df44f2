// oneDNN helpers of the tensor kinds' kernels (binary, matmul, reduce, slice/pad, concat/split):
// plain descs of other shapes over the same data (broadcast with zero strides, strided
// sub-blocks), memories that view another's data at run time, and the sum of a gradient over
// broadcast axes.
//
// A view is re-pointed at its base's data each time its op runs: a base that input_diff()
// returned may be a tensor's gradient inside the flat gradient buffer, which
// Network::set_gradient_buffer moves.
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

#include "workerd/nn/kernel.h"

namespace psrun::nn {

using MemDims = dnnl::memory::dims;

// `dims` with leading 1s up to `rank` (a scalar's {} becomes {1, ..., 1}).
MemDims padded(const MemDims& dims, std::size_t rank);
// Row-major strides of `dims`.
MemDims plain_strides(const MemDims& dims);
// Elements of `dims`.
std::int64_t element_count(const MemDims& dims);
// `from` (plain, same rank as `to`, each dim equal to to's or 1) read as `to`: stride 0 where it
// broadcasts.
dnnl::memory::desc broadcast_desc(const MemDims& from, const MemDims& to, dnnl::memory::data_type type);
// `dims` at `strides` from element `offset` of a buffer.
dnnl::memory::desc strided_desc(const MemDims& dims, dnnl::memory::data_type type, const MemDims& strides,
                                std::int64_t offset);
// The desc of `m` with another data type (same dims and layout).
dnnl::memory::desc with_type(const dnnl::memory::desc& desc, dnnl::memory::data_type type);

// A memory with `desc` over base's data (re-pointed by the ops below before each run).
struct View {
    dnnl::memory view;
    dnnl::memory base;
};
View view_of(const dnnl::memory& base, const dnnl::memory::desc& desc, const dnnl::engine& engine);

// `op` preceded by re-pointing each view at its base.
Op rebased(std::vector<View> views, Op op);
// A primitive's execution as an op, re-pointing `views` first.
Op run_primitive(const KernelBuilder& b, const dnnl::primitive& p, std::unordered_map<int, dnnl::memory> args,
                 std::vector<View> views = {});
// A reorder from `from` to `to` as an op (output scale `scale` when not 1).
Op run_reorder(const KernelBuilder& b, const dnnl::memory& from, const dnnl::memory& to, std::vector<View> views = {},
               float scale = 1.0f);
// Sets every byte of `m` to 0 (f32, bf16 and s32 zeros).
Op run_zero(const dnnl::memory& m);
// Sets every element of `m` (f32 or bf16) to `value`.
Op run_fill(const dnnl::memory& m, float value);

// The node's "axis" attribute resolved against input 0's rank (a negative axis counts from the end).
int axis_attr(const KernelBuilder& b);

// The backward op writing into `to` (f32, a view of dims `to_dims` over the memory input_diff
// returned) scale * the sum of `from` (f32 plain, dims of the same rank) over the axes where
// to_dims is 1 and from's dims are not: a copy when there are none. For a plain f32 `from`, one
// pass at memory speed (kernels/broadcast_sum.h); oneDNN's reduction primitive otherwise.
Op sum_to(const KernelBuilder& b, const dnnl::memory& from, const dnnl::memory& to_base, const MemDims& to_dims,
          float scale = 1.0f);
// The backward op writing into `to` scale * the sum of from * other over the same axes as
// sum_to, in one pass (mul's dB = sum(dC * A)). The views' descs: f32 plain, one shape; their
// bases hold the data (a view's own handle is not read).
Op sum_product_to(const View& from, const View& other, const dnnl::memory& to_base, const MemDims& to_dims,
                  float scale = 1.0f);

}  // namespace psrun::nn
