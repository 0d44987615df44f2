// tf.train.Example, read and written at the protobuf wire level (no generated code: TensorFlow's
// .proto files are not packaged). The messages involved:
//   Example  { Features features = 1; }
//   Features { map<string, Feature> feature = 1; }      (entries: key = 1, value = 2)
//   Feature  { oneof { BytesList bytes_list = 1; FloatList float_list = 2; Int64List int64_list = 3; } }
//   BytesList { repeated bytes value = 1; }  FloatList { repeated float value = 1; }
//   Int64List { repeated int64 value = 1; }
// Repeated numbers are read packed or unpacked, unknown fields are skipped, and as protobuf
// merges them a later entry of the same key (or a later oneof member) wins. Every length is
// checked against the bytes left before anything is read. Pure functions, thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

enum class FeatureKind { kMissing, kBytes, kFloat, kInt64 };
const char* to_string(FeatureKind kind);  // "missing", "bytes_list", "float_list", "int64_list"

// One feature's values. Bytes values point into the parsed record (valid while it lives).
struct FeatureValues {
    FeatureKind kind = FeatureKind::kMissing;
    std::vector<std::span<const std::uint8_t>> bytes;
    std::vector<float> floats;
    std::vector<std::int64_t> ints;
    std::size_t size() const;  // values of its kind
};

// Finds the features named `keys` in the serialized Example `record`: out[i] gets keys[i]'s
// values (kind kMissing when absent). Errors (kInvalidArgument, a description of the fault
// without a file name): a truncated or malformed message.
// REQUIRES: out.size() == keys.size().
[[nodiscard]] Result<void> parse_example(std::span<const std::uint8_t> record, std::span<const std::string> keys,
                                         std::span<FeatureValues> out);

// Every feature key in `record` with its kind, in the order they appear (for messages such as
// "it has: 'image/raw' (bytes_list), 'label' (int64_list)"). Empty on a malformed record.
std::string describe_example_keys(std::span<const std::uint8_t> record);

// Builds a serialized Example (features in the order added; a key added twice appears twice, the
// later winning on reading). For tests, fixtures and `psrun data synthesize`.
class ExampleBuilder {
  public:
    ExampleBuilder& add_bytes(const std::string& key, std::span<const std::uint8_t> value);
    ExampleBuilder& add_floats(const std::string& key, std::span<const float> values);
    ExampleBuilder& add_int64s(const std::string& key, std::span<const std::int64_t> values);
    // The Example's bytes.
    std::vector<std::uint8_t> serialize() const;

  private:
    std::vector<std::uint8_t> features_;  // the Features message: map entries
};

}  // namespace psrun::worker
