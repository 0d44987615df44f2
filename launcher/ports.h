// Port selection and checks. Derived ports follow the formula in docs/architecture.md:
//   block = (job_id * kStepSlots + step_id % kStepSlots) % num_blocks
//   port  = base + block * kPortsPerStep + local_id
// with num_blocks = (limit - base) / kPortsPerStep and limit = 32768 (below the Linux ephemeral
// range 32768-60999) for base < 32768, else 65536 (base must then be >= 61000).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/result.h"

namespace psrun::launcher {

inline constexpr int kDefaultPortBase = 20000;
inline constexpr int kPortsPerStep = 32;  // max tasks per node without SLURM_STEP_RESV_PORTS
inline constexpr std::uint32_t kStepSlots = 4;

// Number of distinct port blocks for `base`; an error if base is unusable.
[[nodiscard]] Result<int> port_block_count(int base);

// The derived port of local task `local_id` of step (job_id, step_id). Errors when base is
// unusable or local_id >= kPortsPerStep.
[[nodiscard]] Result<int> derived_port(std::uint32_t job_id, std::uint32_t step_id, int local_id, int base);

// Checks that a TCP listener can bind host:port now (SO_REUSEADDR, like ZeroMQ). host is
// resolved to IPv4. Errors: kIo naming host:port when it is in use or not an address of this host.
[[nodiscard]] Result<void> check_port_free(const std::string& host, int port);

// `count` distinct free TCP ports on 127.0.0.1 chosen by the kernel. They are released before
// returning, so another process could take one before it is used (the daemon then fails to bind
// and psrun local reports it).
[[nodiscard]] Result<std::vector<int>> free_local_ports(int count);

}  // namespace psrun::launcher
