// conv2d's options as the schema (conv.cpp) and the kernel (conv_kernel.cpp) read them.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "workerd/nn/model_description.h"
#include "workerd/nn/ops/window.h"

namespace psrun::nn {

struct ConvGeometry {
    std::int64_t in_channels = 0;
    std::int64_t filters = 0;
    std::int64_t groups = 1;
    bool bias = true;
    Window2d window;
};

// From a conv2d node's attrs and its input (N x C x H x W). Errors without location.
Result<ConvGeometry> conv_geometry(const nlohmann::json& attrs, const ValueInfo& input);

}  // namespace psrun::nn
