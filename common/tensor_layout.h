// The model's tensor list and its sharding across K parameter servers.
// Parameters (and gradients) live in one contiguous float buffer, tensors in list order;
// a ShardLayout cuts that buffer into slices and assigns each slice to a shard so that every
// shard holds ~1/K of the bytes. The layout is a pure function of (tensors, K): every worker
// and every psd computes the same one, and psd also sends it in WELCOME.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun {

struct TensorSpec {
    std::string name;
    std::vector<std::uint32_t> shape;
    std::size_t elements() const;
    bool operator==(const TensorSpec&) const = default;
};

// TF's mnist_deep CNN: conv1/w [32,1,5,5] ... fc2/b [10]; 3,274,634 floats.
std::vector<TensorSpec> mnist_deep_tensors();
std::size_t total_elements(const std::vector<TensorSpec>& tensors);

// One contiguous run of floats of one tensor, held by one shard.
struct Slice {
    std::uint32_t tensor = 0;  // index into the tensor list
    std::uint64_t offset = 0;  // first element within the tensor
    std::uint64_t length = 0;  // number of floats (> 0)
    std::uint32_t shard = 0;
    std::uint64_t flat_offset = 0;  // first element within the whole contiguous buffer
    bool operator==(const Slice&) const = default;
};

struct ShardLayout {
    std::uint32_t num_shards = 0;
    std::vector<Slice> slices;  // in flat-buffer order; ids are indices into this vector
    std::size_t total = 0;      // floats in the whole buffer

    // Slice ids held by `shard`, ascending.
    std::vector<std::uint32_t> slices_of(std::uint32_t shard) const;
    std::size_t shard_size(std::uint32_t shard) const;  // floats held by `shard`
    bool operator==(const ShardLayout&) const = default;
};

// Greedy contiguous split: shard s receives flat range [s*T/K, (s+1)*T/K), rounded so that a
// tensor smaller than kMinSliceFloats is never cut. REQUIRES nothing: errors on K == 0, an
// empty list, or a tensor with zero elements.
inline constexpr std::size_t kMinSliceFloats = 4096;
[[nodiscard]] Result<ShardLayout> compute_layout(const std::vector<TensorSpec>& tensors,
                                                 std::uint32_t num_shards);

// Checks that a layout received from a peer is well-formed for `tensors`: slices cover each
// tensor exactly once, in order, with shard ids < num_shards.
[[nodiscard]] Result<void> validate_layout(const ShardLayout& layout,
                                           const std::vector<TensorSpec>& tensors);

// A stable 64-bit fingerprint of the tensor list (names and shapes), used in shard files.
std::uint64_t tensors_fingerprint(const std::vector<TensorSpec>& tensors);

}  // namespace psrun
