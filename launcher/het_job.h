// Roles from a heterogeneous Slurm job (`#SBATCH hetjob`, docs/running.md "Heterogeneous jobs"):
// a step launched with `srun --het-group=0,1,...` over every component runs psd on the nodes of
// component 0 and workers on the nodes of the others, without --tasks or --ps. Pure functions of
// the environment, so every task of the step derives the same roles.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/env_map.h"
#include "launcher/role_assignment.h"

namespace psrun::launcher {

struct HetGroups {
    std::vector<std::vector<std::string>> nodes;  // per component: SLURM_JOB_NODELIST_HET_GROUP_<i>, expanded
    std::vector<int> num_tasks;                   // per component: SLURM_NTASKS_HET_GROUP_<i>
};

// nullopt when SLURM_HET_SIZE is unset (not a het job). Errors (kInvalidArgument, naming the
// variable): SLURM_HET_SIZE not in 1..64, a component's variables missing or malformed.
[[nodiscard]] Result<std::optional<HetGroups>> parse_het_groups(const EnvMap& env);

// The roles of a step's slots (role_assignment.h; `nodes` and `tasks_per_node` as SlurmEnv has
// them) when the step spans every component (its task count is the components' sum): ps on the nodes of component 0,
// workers on the others'. nullopt when the step runs in only some components (an ordinary step: the usual defaults
// apply). Errors: a node in component 0 and another component (its tasks' roles would be ambiguous: give
// --tasks), or no worker left.
[[nodiscard]] Result<std::optional<std::vector<TaskRole>>> het_roles(const HetGroups& groups,
                                                                     const std::vector<std::string>& nodes,
                                                                     const std::vector<int>& tasks_per_node);

}  // namespace psrun::launcher
