// Shape rules shared by the tensor kinds (binary.cpp, matmul.cpp, reduce.cpp, slice_pad.cpp):
// numpy broadcasting over dims symbolic in the batch size, and axis normalisation.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"
#include "workerd/nn/tensor_shape.h"

namespace psrun::nn {

// Numpy broadcasting, aligned at the last dim: equal dims stay, a constant 1 stretches to the
// other's dim. A batch dim (kN) meets only the same kN or 1: any other pairing would depend on
// the batch size. Errors name both shapes.
Result<Dims> broadcast_dims(const Dims& a, const Dims& b);

// `axis` in [-rank, rank) as a non-negative index, or an error "axis A for rank R".
Result<std::int64_t> normal_axis(std::int64_t axis, std::size_t rank);

// Sorted, distinct, non-negative axes, or an error naming the bad or repeated one.
Result<std::vector<std::int64_t>> normal_axes(const std::vector<std::int64_t>& axes, std::size_t rank);

}  // namespace psrun::nn
