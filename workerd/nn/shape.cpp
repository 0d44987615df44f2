#include "workerd/nn/shape.h"

#include <algorithm>

namespace psrun::nn {

std::string ActivationShape::to_string() const {
    if (flat) return std::to_string(channels);
    return std::to_string(channels) + "x" + std::to_string(height) + "x" + std::to_string(width);
}

std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors, std::int64_t limit) {
    std::int64_t product = 1;
    for (const std::int64_t f : factors) {
        if (f < 0) return std::nullopt;
        if (f == 0) {
            product = 0;
            continue;
        }
        if (product > limit / f) return std::nullopt;
        product *= f;
    }
    return product;
}

AxisPlan plan_axis(std::int64_t in, std::int64_t k, std::int64_t stride, Padding padding) {
    AxisPlan plan;
    if (padding == Padding::kValid) {
        plan.out = (in - k + stride) / stride;  // ceil((in - k + 1) / stride)
        return plan;
    }
    plan.out = (in + stride - 1) / stride;
    const std::int64_t total = std::max<std::int64_t>((plan.out - 1) * stride + k - in, 0);
    plan.pad_before = total / 2;
    plan.pad_after = total - plan.pad_before;
    return plan;
}

const char* to_string(Padding padding) { return padding == Padding::kSame ? "same" : "valid"; }

}  // namespace psrun::nn
