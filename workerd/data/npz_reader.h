// NumPy .npz archives (np.savez, np.savez_compressed): a zip file whose members are .npy files
// named after the arrays ("x.npy"). Read from memory: the end-of-central-directory record (zip64
// too, as numpy writes for large arrays), the central directory, each member's local header;
// members stored (method 0) or deflated (method 8, inflated by zlib, CRC-32 checked). Every
// offset and size is checked against the archive before use. Errors (kInvalidArgument) name
// the file and the member.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::worker {

struct NpzMember {
    std::string name;  // without ".npy"
    std::uint16_t method = 0;
    std::uint64_t compressed = 0;
    std::uint64_t size = 0;
    std::uint32_t crc = 0;
    std::uint64_t local_offset = 0;
};

// Lists the archive's members.
[[nodiscard]] Result<std::vector<NpzMember>> list_npz(const std::vector<std::uint8_t>& zip, const std::string& path);

// The bytes of member `name` (without ".npy"). Errors list the members there are when it is
// missing. Inflated members are limited to 4 GiB.
[[nodiscard]] Result<std::vector<std::uint8_t>> read_npz_member(const std::vector<std::uint8_t>& zip,
                                                                const std::vector<NpzMember>& members,
                                                                const std::string& name, const std::string& path);

}  // namespace psrun::worker
