// How much memory a shard may ask of this host. The first HELLO's tensor list sizes the shard,
// and that list comes from a client: psd refuses a shard the host cannot hold (issue 39) before
// allocating it, rather than fail (std::bad_alloc) or be killed by the OOM killer half-way.
#pragma once

#include <cstdint>

#include "common/result.h"
#include "common/tensor_layout.h"

namespace psrun::psd {

// The memory this process may use, in bytes: the smaller of the host's physical memory and the
// limit of its memory cgroup (v2 memory.max or v1 memory.limit_in_bytes; Slurm's task/cgroup
// plugin sets it to the step's --mem). Never 0.
std::uint64_t host_memory_bytes();

// What shard `shard` of `layout` needs at least once initialised: its dense parameters twice
// (one reply buffer or optimizer slot beside them) and the sparse tables' created-row bitmaps
// (their values are reserved lazily). kInvalidArgument naming both sizes and what to do when
// that exceeds `budget` bytes.
[[nodiscard]] Result<void> check_shard_memory(const ShardLayout& layout, std::uint32_t shard, std::uint64_t budget);

}  // namespace psrun::psd
