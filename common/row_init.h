// The initial values of a rows tensor (common/tensor_layout.h RowInit): element (row, col) is a
// pure function of (seed, row, col), computed where the row lives (psd), so that no initial
// table crosses the wire and any shard count gives the same table. Pure, thread-safe.
//   zeros              0
//   uniform            U(-scale, scale)
//   normal             N(0, scale^2) (Box-Muller)
//   truncated normal   N(0, scale^2) redrawn beyond 2 scale, as TF's truncated_normal
// The random bits come from SplitMix64 over (seed, row, col, draw), so values do not depend on
// the order rows are initialised in.
#pragma once

#include <cstdint>
#include <span>

#include "common/tensor_layout.h"

namespace psrun {

float row_init_value(const RowInit& init, std::uint64_t row, std::uint32_t col);
// out[c] = row_init_value(init, row, c) for c < out.size().
void fill_row(const RowInit& init, std::uint64_t row, std::span<float> out);

}  // namespace psrun
