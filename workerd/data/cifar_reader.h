// Reader for the CIFAR-10 and CIFAR-100 binary batch files (the "binary version" archives:
// data_batch_1.bin ... test_batch.bin, train.bin / test.bin). A CIFAR-10 record is 1 label byte
// then 3 x 32 x 32 pixel bytes (the red plane, then green, then blue, each row-major); a CIFAR-100
// record is a coarse label byte, a fine label byte, then the same 3072 pixel bytes. The files have
// no header or magic: a file is checked by its length (a whole number of records) and its labels
// (< 10; < 20 coarse and < 100 fine). Errors name the file and the record (kInvalidArgument).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"
#include "workerd/data/labeled_images.h"

namespace psrun::worker {

// Which format, and for CIFAR-100 which of its two labels the examples carry.
enum class CifarFormat { kCifar10, kCifar100, kCifar100Coarse };

// "cifar10", "cifar100" (fine labels, 100 classes) or "cifar100-coarse" (20 superclasses).
[[nodiscard]] Result<CifarFormat> parse_cifar_format(std::string_view name);
std::size_t cifar_record_bytes(CifarFormat format);  // 3073 or 3074

// Appends the records in `bytes` to `out` (uint8, 3x32x32; out must be empty or hold CIFAR
// records already; unspecified after an error). `path` names the file in messages.
[[nodiscard]] Result<void> parse_cifar(const std::vector<std::uint8_t>& bytes, const std::string& path,
                                       CifarFormat format, LabeledImages& out);

// Reads and concatenates the files in order (each raw or gzip-compressed).
[[nodiscard]] Result<LabeledImages> read_cifar(const std::vector<std::string>& paths, CifarFormat format);

}  // namespace psrun::worker
