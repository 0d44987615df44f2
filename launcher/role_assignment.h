// Role assignment inside a Slurm step: a pure function of the step geometry (tasks per node)
// and the user's options, so every task of the step computes the same roles.
//
// Slots: the step's tasks enumerated node by node (nodelist order), by local id within a node.
// Slot k is what tf4slurm's ListOfTFTasks element k describes; under block distribution slot k
// is the task with SLURM_PROCID k.
#pragma once

#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun::launcher {

enum class TaskRole { kPs, kWorker, kChief, kEvaluator };

enum class Placement { kSpread, kPack };

// Parses "ps,worker,chief,evaluator,..." (names are case-sensitive, no empty items).
[[nodiscard]] Result<std::vector<TaskRole>> parse_task_list(std::string_view text);

// Parses "spread" or "pack".
[[nodiscard]] Result<Placement> parse_placement(std::string_view text);

// Roles for `num_ps` parameter servers, all other slots workers.
// kPack: the first num_ps slots. kSpread: local id 0 of every node in node order, then local
// id 1 of every node that has one, and so on (at most one ps per node until every node has one).
// REQUIRES: every tasks_per_node entry >= 1. Errors when num_ps < 0 or no worker is left.
[[nodiscard]] Result<std::vector<TaskRole>> place_ps(const std::vector<int>& tasks_per_node, int num_ps,
                                                     Placement placement);

// Checks a role list against the step: its length equals the number of tasks, at least one
// worker or chief, at most one chief.
[[nodiscard]] Result<void> check_task_list(const std::vector<TaskRole>& roles, int num_tasks);

// Slot index of (node, local id): sum of tasks_per_node before `node`, plus local_id.
int slot_index(const std::vector<int>& tasks_per_node, int node, int local_id);

}  // namespace psrun::launcher
