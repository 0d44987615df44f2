// Shapes of activations and the checked size arithmetic of the model description.
// Every size a description can produce is bounded by kMaxTensorElements, so products of two
// checked sizes fit in int64 and nothing downstream can overflow.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>

namespace psrun::nn {

// Largest number of elements in one tensor (an activation per example, a parameter tensor) and
// in a model's parameters altogether: 2^31 - 1 (8 GiB as f32).
inline constexpr std::int64_t kMaxTensorElements = (std::int64_t{1} << 31) - 1;
// Most values a `constant` layer holds in the description (2^20): larger fixed tensors are
// parameters (frozen ones where nothing trains them).
inline constexpr std::int64_t kMaxConstantValues = std::int64_t{1} << 20;

// A 2-D size or step: kernel, pooling window, stride.
struct Extent2 {
    std::int64_t h = 1;
    std::int64_t w = 1;
    bool operator==(const Extent2&) const = default;
};

enum class Padding : std::uint8_t { kValid, kSame };

// Zero (or, for pooling, ignored) rows/columns added on each side of the input.
struct Pads {
    std::int64_t top = 0;
    std::int64_t bottom = 0;
    std::int64_t left = 0;
    std::int64_t right = 0;
    bool operator==(const Pads&) const = default;
};

// One example's activation. An image is channels x height x width (the values are the same
// whether the engine stores them NCHW or NHWC); flat features (after a dense layer) have
// flat == true, channels == the feature count and height == width == 1.
struct ActivationShape {
    std::int64_t channels = 0;
    std::int64_t height = 1;
    std::int64_t width = 1;
    bool flat = false;

    std::int64_t elements() const { return channels * height * width; }
    // "32x28x28" for an image (CxHxW), "1024" for flat features.
    std::string to_string() const;
    bool operator==(const ActivationShape&) const = default;
};

// The product of `factors` when every factor is >= 0 and the product is <= limit; nullopt
// otherwise (never overflows).
std::optional<std::int64_t> checked_product(std::initializer_list<std::int64_t> factors,
                                            std::int64_t limit = kMaxTensorElements);

// TF's rule for one spatial axis. valid: out = ceil((in - k + 1) / stride), no padding;
// same: out = ceil(in / stride), total padding max((out - 1) * stride + k - in, 0) split as
// before = total / 2 and the extra one after. REQUIRES: in, k, stride >= 1; valid: in >= k.
struct AxisPlan {
    std::int64_t out = 0;
    std::int64_t pad_before = 0;
    std::int64_t pad_after = 0;
};
AxisPlan plan_axis(std::int64_t in, std::int64_t k, std::int64_t stride, Padding padding);

const char* to_string(Padding padding);

}  // namespace psrun::nn
