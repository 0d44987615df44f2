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

#include <nlohmann/json_fwd.hpp>
#include <optional>

#include "common/tensor_layout.h"

namespace psrun {

float row_init_value(const RowInit& init, std::uint64_t row, std::uint32_t col);
// out[c] = row_init_value(init, row, c) for c < out.size().
void fill_row(const RowInit& init, std::uint64_t row, std::span<float> out);

// How a checkpoint's manifest records a rows tensor's initializer ("layout" "tensors" entries'
// "row_init": common/checkpointer.cpp): {"kind": "zeros" | "uniform" | "normal" |
// "truncated_normal", "scale", "seed"}. Reading: nullopt for anything else.
nlohmann::json row_init_to_json(const RowInit& init);
std::optional<RowInit> row_init_from_json(const nlohmann::json& j);

}  // namespace psrun
