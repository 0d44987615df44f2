// The pools' options as the schema (pool.cpp) and the kernel (pool_kernel.cpp) read them.
#pragma once

#include "common/result.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/ops/window.h"

namespace psrun::nn {

struct PoolGeometry {
    int spatial = 2;                 // 1: over N x C x L (the window has H = 1), 2: N x C x H x W, 3: N x C x D x H x W
    bool max = true;                 // max_pool; else an average
    bool count_include_pad = false;  // avg_pool: divide by the whole window (PyTorch's default)
    bool global = false;             // global_avg_pool, global_max_pool: the window is H x W (or L, or D x H x W)
    Window2d window;                 // with ceil_mode's end pads included
};

// From a pool node (kind and attrs) and its input (N x C x H x W, N x C x L for a 1-D window,
// N x C x D x H x W for a 3-D one; a global pool takes any of them). Errors without location.
Result<PoolGeometry> pool_geometry(const Node& node, const ValueInfo& input);

}  // namespace psrun::nn
