// A file of named float tensors, each protected by its own CRC-32C: the unit a checkpoint
// is made of (one file per psd shard, one for the chief). Format (little-endian):
//   file   := "PSRUNTF1" tensor* footer
//   tensor := name_len: u32, name: byte[name_len], rank: u32, dims: u64[rank],
//             count: u64, data: f32[count], crc: u32      // crc32c of the tensor's bytes before it
//   footer := "PSRUNEND" tensors: u32, crc: u32            // crc32c of the tensor crcs, in order
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun {

struct NamedTensor {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::vector<float> data;  // product(shape) values, row-major
};

struct TensorView {
    std::string name;
    std::vector<std::uint64_t> shape;
    std::span<const float> data;
    // When set, the tensor's product(shape) floats are not in `data` but produced by `fill` in
    // pieces, in order: fill(first, out) writes floats [first, first + out.size()). Its error
    // stops the write (the file is removed). Used for a sparse table's rows computed on the
    // fly (psd/row_store.h read()).
    std::function<Result<void>(std::uint64_t first, std::span<float> out)> fill = {};
    std::uint64_t count() const;  // floats: data.size(), or product(shape) with fill
};

// Writes the tensors to `path` and fsyncs the file, streaming each tensor's data from its span
// (common/tensor_file_stream.h). On any failure (disk full included) the partial file is removed
// and an kIo error names the path and the system error.
[[nodiscard]] Result<void> write_tensor_file(const std::string& path, std::span<const TensorView> tensors);

// Reads and verifies every CRC. Any damage (truncation, flipped bit, bad count) is a
// kInvalidArgument error naming the file and the tensor.
[[nodiscard]] Result<std::vector<NamedTensor>> read_tensor_file(const std::string& path);

// The in-memory halves of the two functions above. encode_tensor_file returns the exact file
// bytes; parse_tensor_file checks them as read_tensor_file does (`path` only names the source
// in error messages). parse(encode(t)) == t, and encode(parse(b)) == b for every accepted b.
// encode_tensor_file takes views of data only (a view with fill: std::invalid_argument).
std::string encode_tensor_file(std::span<const TensorView> tensors);
[[nodiscard]] Result<std::vector<NamedTensor>> parse_tensor_file(std::string_view bytes, const std::string& path);

}  // namespace psrun
