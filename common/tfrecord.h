// TFRecord framing, the container of TensorBoard event files:
//   record := length: uint64le, masked_crc32c(length): uint32le, data: byte[length],
//             masked_crc32c(data): uint32le
#pragma once

#include <cstdio>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun {

// Appends one framed record to `out`.
void append_tfrecord(std::string& out, std::string_view data);

// Reads every record of a TFRecord file, checking both CRCs of each. A truncated last
// record (a writer killed mid-write) is reported as an error naming the offset.
[[nodiscard]] Result<std::vector<std::string>> read_tfrecords(const std::string& path);

}  // namespace psrun
