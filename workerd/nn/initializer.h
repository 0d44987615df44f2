// How a parameter tensor starts: the initializers users know from TF/Keras.
// JSON: {"kind": "truncated_normal", "stddev": 0.1}, {"kind": "uniform", "limit": 0.05},
// {"kind": "constant", "value": 0.1}, or a bare string for the parameterless ones
// ("glorot_uniform", "he_normal", "zeros"). Fan-in/fan-out for glorot_uniform and he_normal
// are TF's: conv [O, I, KH, KW]: fan_in = I*KH*KW, fan_out = O*KH*KW; dense [O, I]: I and O.
#pragma once

#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace psrun::nn {

enum class InitKind : std::uint8_t {
    kTruncatedNormal,  // N(0, stddev^2), redrawn beyond 2 stddev (TF's truncated_normal)
    kNormal,           // N(0, stddev^2)
    kUniform,          // U(-limit, limit)
    kGlorotUniform,    // U(-l, l), l = sqrt(6 / (fan_in + fan_out)); Keras' default weights
    kHeNormal,         // truncated normal, stddev sqrt(2 / fan_in) (Keras' he_normal)
    kZeros,            // Keras' default biases
    kConstant,         // value
};

struct Initializer {
    InitKind kind = InitKind::kZeros;
    double value = 0.0;  // stddev (normal kinds), limit (uniform), value (constant); else 0
    bool operator==(const Initializer&) const = default;
};

// `where` prefixes errors, e.g. `model F: layer 0 (conv2d): field "weight_init"`.
Result<Initializer> parse_initializer(const nlohmann::json& value, const std::string& where);
// Canonical JSON: always an object with "kind" and, when it has one, its parameter.
nlohmann::json to_json(const Initializer& init);
// "truncated_normal(stddev=0.1)", "zeros".
std::string to_string(const Initializer& init);

}  // namespace psrun::nn
