// all_finite: the NaN/Inf scan of gradients and tensor files, below the wire protocol so that
// the thread team and the tensor files need not link it (common/meson.build's layers).
#pragma once

#include <cstddef>

namespace psrun {

// True when every one of the `count` floats at `data` is finite (no NaN, no Inf). Vectorised;
// `data` need not be aligned.
bool all_finite(const void* data, std::size_t count);

}  // namespace psrun
