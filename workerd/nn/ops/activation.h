// The element-wise activations (activation.cpp) as a table the schema and the kernel share.
#pragma once

#include <string_view>

namespace psrun::nn {

enum class Activation {
    kRelu,
    kTanh,
    kSigmoid,
    kLeakyRelu,
    kElu,
    kClip,
    kGelu,
    kGeluTanh,
    kExp,
    kLog,
    kSqrt,
    kAbs,
    kSoftplus,
    kSwish,
    kHardSwish,
    kNeg,
    kSelu,
    kHardSigmoid,
    kMish,
    kReciprocal
};

// nullptr when `kind` is not an activation.
const Activation* find_activation(std::string_view kind);

}  // namespace psrun::nn
