// A model's parameters (or their gradients) as named tensors in one contiguous float buffer.
//
// The tensor list comes from the model description (workerd/nn/model_summary.h:
// parameter_tensors()): every layer's tensors in layer order, weights before bias, each in its
// plain layout (conv oihw, dense oi over NHWC-flattened inputs, bias x), packed without gaps.
// This buffer is what goes on the wire to the parameter servers and into checkpoints, and
// what the network (workerd/nn/network.h) reads and writes in place.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "common/tensor_layout.h"
#include "workerd/nn/model_description.h"

namespace psrun::worker {

struct TensorInfo {
    std::string name;                 // "conv1/w", ...
    std::vector<std::int64_t> shape;  // in the plain layout
    std::size_t offset = 0;           // in floats from the start of the buffer
    std::size_t size = 0;             // in floats
    // Trainable (the optimizer updates it) or state (updated by params -= grads; the gradient
    // buffer holds the amount to subtract): nn::TensorEntry::cls.
    TensorClass tensor_class = TensorClass::kTrainable;
};

// The description's parameter tensors, in buffer order.
std::vector<TensorInfo> model_tensors(const nn::ModelDescription& model);
// The same list as psd and checkpoints name it (common/tensor_layout.h); a scalar (shape []) as [1].
std::vector<TensorSpec> wire_tensors(const std::vector<TensorInfo>& tensors);

// Owns a 64-byte-aligned buffer, or views one it does not own (shared memory). Movable, not
// copyable; spans stay valid while it (and a viewed buffer) lives. Not thread-safe.
// An owned buffer may have a local tail after the tensors: floats that are not on the wire
// (a sparse table's rows of the current batch, workerd/sparse_tables.h). all() never includes it.
class ParameterSet {
  public:
    // An owned buffer, zero-filled.
    explicit ParameterSet(std::vector<TensorInfo> tensors, std::size_t tail = 0);
    // A view of `memory` (not owned, not cleared). REQUIRES: memory.size() equals the tensors'
    // total, 64-byte aligned; memory outlives this set (else std::invalid_argument).
    ParameterSet(std::vector<TensorInfo> tensors, std::span<float> memory);

    const std::vector<TensorInfo>& tensors() const { return tensors_; }
    std::span<float> all() { return {data_.get(), size_}; }
    std::span<const float> all() const { return {data_.get(), size_}; }
    std::span<float> tensor(std::size_t index);
    std::span<const float> tensor(std::size_t index) const;
    std::size_t size() const { return size_; }
    // The tensors and the tail after them, contiguous; tail() alone.
    std::span<float> with_tail() { return {data_.get(), size_ + tail_}; }
    std::span<float> tail() { return {data_.get() + size_, tail_}; }
    void fill(float value);

  private:
    struct Free {
        bool owned;
        void operator()(float* p) const;
    };
    std::vector<TensorInfo> tensors_;
    std::size_t size_ = 0;
    std::size_t tail_ = 0;
    std::unique_ptr<float[], Free> data_;
};

}  // namespace psrun::worker
