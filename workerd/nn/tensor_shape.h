// Shapes of the values of a model graph, symbolic in the batch size N: a dimension is a
// constant or a multiple of N (a batch axis, or a batch axis merged with others, as attention
// reshapes [L, N, E] into [L, N*heads, E/heads]). The engine evaluates them at its batch size.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace psrun::nn {

// What a value holds: floats (activations, parameters; f32 or bf16 in the engine) or integer
// ids (token ids, indices; int32 in the engine, int64 in ONNX and .npy files).
enum class ElementType : std::uint8_t { kFloat, kInt };
const char* to_string(ElementType type);

// value, or value * N when batch. value >= 1.
struct Dim {
    std::int64_t value = 1;
    bool batch = false;

    static Dim of(std::int64_t v) { return Dim{v, false}; }
    static Dim batch_times(std::int64_t k = 1) { return Dim{k, true}; }
    std::int64_t at(std::int64_t batch_size) const { return batch ? value * batch_size : value; }
    // "N", "8N", "28".
    std::string to_string() const;
    bool operator==(const Dim&) const = default;
};
using Dims = std::vector<Dim>;

struct ValueInfo {
    Dims dims;
    ElementType type = ElementType::kFloat;
    std::size_t rank() const { return dims.size(); }
    bool operator==(const ValueInfo&) const = default;
};

// "N x 32 x 28 x 28"; "scalar" for rank 0.
std::string to_string(const Dims& dims);
// The dims at batch size n.
std::vector<std::int64_t> concrete(const Dims& dims, std::int64_t n);
// Elements at batch size 1 (per example for values with one batch axis); nullopt beyond
// kMaxTensorElements.
std::optional<std::int64_t> elements_per_example(const Dims& dims);
// True when some dimension scales with the batch.
bool has_batch(const Dims& dims);
// Constant dims (no batch axis) as plain integers.
Dims constant_dims(const std::vector<std::int64_t>& dims);

}  // namespace psrun::nn
