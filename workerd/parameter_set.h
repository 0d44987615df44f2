// The model's parameters (or their gradients) as named tensors in one contiguous float buffer.
//
// Order and plain layouts, fixed (this is what goes on the wire to the parameter servers):
//   conv1/w [C1, 1, K, K]   oihw      conv1/b [C1]  x
//   conv2/w [C2, C1, K, K]  oihw      conv2/b [C2]  x
//   fc1/w   [F, H/4*W/4*C2] oi        fc1/b   [F]   x
//   fc2/w   [Z, F]          oi        fc2/b   [Z]   x
// fc1/w's input index follows TF's flattening of the NHWC pooled activations:
//   i = (h * (W/4) + w) * C2 + c      (for MNIST: i = h*448 + w*64 + c, 7x7x64 = 3136)
// i.e. fc1/w is TF's W_fc1 [3136, 1024] transposed. fc2/w is TF's W_fc2 transposed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace psrun::worker {

// Layer sizes of the mnist_deep network; the defaults are the real model, tests use tiny ones.
struct ModelShape {
    int height = 28;         // divisible by 4
    int width = 28;          // divisible by 4
    int kernel = 5;          // odd (SAME padding)
    int conv1_channels = 32;
    int conv2_channels = 64;
    int fc1_units = 1024;
    int classes = 10;

    int flat_features() const { return (height / 4) * (width / 4) * conv2_channels; }
};

struct TensorInfo {
    std::string name;                // "conv1/w", ...
    std::vector<std::int64_t> shape;  // in the plain layout above
    std::size_t offset = 0;           // in floats from the start of the buffer
    std::size_t size = 0;             // in floats
};

// Owns a 64-byte-aligned buffer, or views one it does not own (shared memory). Movable, not
// copyable; spans stay valid while it (and a viewed buffer) lives.
class ParameterSet {
public:
    explicit ParameterSet(const ModelShape& shape);
    // A view of `memory` (not owned, not cleared). REQUIRES: memory.size() equals the shape's
    // parameter count, 64-byte aligned; memory outlives this set.
    ParameterSet(const ModelShape& shape, std::span<float> memory);

    enum Index : int { kConv1W, kConv1B, kConv2W, kConv2B, kFc1W, kFc1B, kFc2W, kFc2B, kCount };

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    std::span<float> all() { return {data_.get(), size_}; }
    std::span<const float> all() const { return {data_.get(), size_}; }
    std::span<float> tensor(int index);
    std::span<const float> tensor(int index) const;
    std::size_t size() const { return size_; }

    // TF mnist_deep initialisation: weights truncated normal (stddev 0.1), biases 0.1.
    void init_tutorial(std::uint64_t seed);
    void fill(float value);

private:
    struct Free {
        bool owned;
        void operator()(float* p) const;
    };
    void add_tensors(const ModelShape& shape);
    std::vector<TensorInfo> tensors_;
    std::size_t size_ = 0;
    std::unique_ptr<float[], Free> data_;
};

}  // namespace psrun::worker
