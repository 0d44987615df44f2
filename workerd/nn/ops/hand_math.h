// The element-wise functions computed by hand (oneDNN 2.6's eltwise has none of them), one row
// each: the kind, its ONNX op, y = f(x) and dy/dx. math.cpp builds their schemas (import and
// export by the op name) and math_kernel.cpp their kernel from this table; a new function is a
// row here and a line in kinds.def.
#pragma once

#include <cmath>
#include <span>
#include <string_view>

namespace psrun::nn {

struct HandMathFunction {
    std::string_view kind;
    std::string_view onnx_op;
    float (*forward)(float x);
    float (*slope)(float x);  // dy/dx at x (0 for the step functions: sign, floor, ceil, round)
};

inline std::span<const HandMathFunction> hand_math_functions() {
    static constexpr HandMathFunction kTable[] = {
        {"erf", "Erf", [](float x) { return std::erf(x); },
         [](float x) { return 1.1283791670955126f * std::exp(-x * x); }},  // 2 / sqrt(pi)
        {"sin", "Sin", [](float x) { return std::sin(x); }, [](float x) { return std::cos(x); }},
        {"cos", "Cos", [](float x) { return std::cos(x); }, [](float x) { return -std::sin(x); }},
        {"tan", "Tan", [](float x) { return std::tan(x); }, [](float x) { return 1.0f / (std::cos(x) * std::cos(x)); }},
        {"asin", "Asin", [](float x) { return std::asin(x); }, [](float x) { return 1.0f / std::sqrt(1.0f - x * x); }},
        {"acos", "Acos", [](float x) { return std::acos(x); }, [](float x) { return -1.0f / std::sqrt(1.0f - x * x); }},
        {"atan", "Atan", [](float x) { return std::atan(x); }, [](float x) { return 1.0f / (1.0f + x * x); }},
        {"sinh", "Sinh", [](float x) { return std::sinh(x); }, [](float x) { return std::cosh(x); }},
        {"cosh", "Cosh", [](float x) { return std::cosh(x); }, [](float x) { return std::sinh(x); }},
        {"asinh", "Asinh", [](float x) { return std::asinh(x); },
         [](float x) { return 1.0f / std::sqrt(x * x + 1.0f); }},
        {"acosh", "Acosh", [](float x) { return std::acosh(x); },
         [](float x) { return 1.0f / std::sqrt(x * x - 1.0f); }},
        {"atanh", "Atanh", [](float x) { return std::atanh(x); }, [](float x) { return 1.0f / (1.0f - x * x); }},
        {"sign", "Sign", [](float x) { return x > 0.0f   ? 1.0f
                                              : x < 0.0f ? -1.0f
                                                         : 0.0f; }, [](float) { return 0.0f; }},
        {"floor", "Floor", [](float x) { return std::floor(x); }, [](float) { return 0.0f; }},
        {"ceil", "Ceil", [](float x) { return std::ceil(x); }, [](float) { return 0.0f; }},
        // ONNX Round: halves to even (std::nearbyint in the default rounding mode).
        {"round", "Round", [](float x) { return std::nearbyint(x); }, [](float) { return 0.0f; }},
    };
    return kTable;
}

// The row of `kind` or of ONNX op `onnx_op` (nullptr when none).
inline const HandMathFunction* find_hand_math(std::string_view kind, std::string_view onnx_op = {}) {
    for (const auto& f : hand_math_functions())
        if ((!kind.empty() && f.kind == kind) || (!onnx_op.empty() && f.onnx_op == onnx_op)) return &f;
    return nullptr;
}

}  // namespace psrun::nn
