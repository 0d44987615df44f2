// Parsers for Slurm's compact number lists that libslurm has no public API for.
#pragma once

#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::launcher {

// Largest count or repeat accepted in a tasks-per-node list, and the largest total.
inline constexpr int kMaxTasksPerList = 1'000'000;

// SLURM_TASKS_PER_NODE / SLURM_STEP_TASKS_PER_NODE: "2(x3),1" -> {2, 2, 2, 1}.
// Grammar: item ("," item)*; item := N | N "(x" R ")"; N >= 1, R >= 1, decimal.
// Errors (kInvalidArgument) quote the offending item.
[[nodiscard]] Result<std::vector<int>> parse_tasks_per_node(std::string_view text);

// SLURM_STEP_RESV_PORTS: "20001-20003" or "1000,1002" or "1000-1001,1005" -> ports in order.
// Every port is in 1..65535, ranges ascend, no port repeats.
[[nodiscard]] Result<std::vector<int>> parse_port_list(std::string_view text);

}  // namespace psrun::launcher
