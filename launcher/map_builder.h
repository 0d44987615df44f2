// Resolves the cluster map from the first source that applies: TF-style flags, then a preview
// step (--nodelist, plan only), then TF_CONFIG, then the Slurm job step. Pure apart from
// reading network interfaces for --interface, so every task of a step derives the same map.
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/cluster_map.h"
#include "common/result.h"
#include "launcher/addresses.h"
#include "launcher/env_map.h"
#include "launcher/ports.h"
#include "launcher/slurm_env.h"
#include "launcher/tf_cluster.h"

namespace psrun::launcher {

// Options shared by `psrun plan` and `psrun run`.
struct MapOptions {
    TfFlags tf;
    std::string tasks;          // --tasks ps,worker,...; excludes num_ps
    std::optional<int> num_ps;  // --ps K (default 1; 0 for a one-task step)
    std::string placement = "spread";
    AddressOptions address;
    int port_base = kDefaultPortBase;
    std::optional<int> threads;  // --threads; default SLURM_CPUS_PER_TASK, else the affinity mask
    // Preview outside Slurm (block distribution assumed): --nodelist, --tasks-per-node, --procid.
    std::string preview_nodelist;
    std::string preview_tasks_per_node;
    int preview_procid = 0;
    std::uint32_t preview_job_id = 0;
    std::uint32_t preview_step_id = 0;
};

// Builds the map of a parsed Slurm step. Self is the slot (SLURM_NODEID, SLURM_LOCALID).
// `self_on_node` false (preview) skips the own-interface lookup.
[[nodiscard]] Result<ClusterMap> map_from_slurm(const SlurmEnv& step, const MapOptions& options,
                                                bool self_on_node = true);

// The environment a preview step would have: block distribution, rank `preview_procid`.
[[nodiscard]] Result<EnvMap> preview_env(const MapOptions& options);

// First matching source wins; errors are kInvalidArgument/kNotFound with a message naming the
// variable or flag. Sets map.threads from --threads, else SLURM_CPUS_PER_TASK, else
// `affinity_cpus` when > 0 (psrun run passes the size of its affinity mask, which srun binds;
// 0 leaves map.threads unset: plan previews other tasks, whose masks psrun cannot see).
[[nodiscard]] Result<ClusterMap> resolve_map(const MapOptions& options, const EnvMap& env, int affinity_cpus = 0);

}  // namespace psrun::launcher

namespace psrun::launcher {

// The map of `psrun local`: addresses are given in rank order (ps..., workers..., evaluators...),
// node "localhost", worker 0 the chief, no self. Errors when workers < 1 or counts are negative.
[[nodiscard]] Result<ClusterMap> local_map(int num_ps, int num_workers, int num_evaluators,
                                           const std::vector<std::string>& addresses);

}  // namespace psrun::launcher
