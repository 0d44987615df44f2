// What a Slurm job-step task knows about its step, parsed and cross-checked from the environment.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/result.h"
#include "launcher/env_map.h"
#include "launcher/het_job.h"

namespace psrun::launcher {

struct SlurmEnv {
    std::vector<std::string> nodes;   // step nodelist, expanded, in Slurm's node order
    std::vector<int> tasks_per_node;  // same length as nodes
    int num_tasks = 0;                // == sum(tasks_per_node)
    int procid = 0;                   // SLURM_PROCID of the calling task
    int nodeid = 0;                   // index into nodes
    int localid = 0;                  // < tasks_per_node[nodeid]
    std::optional<int> cpus_per_task;
    std::vector<int> resv_ports;  // SLURM_STEP_RESV_PORTS expanded; empty when unset
    std::uint32_t job_id = 0;
    std::uint32_t step_id = 0;
    std::optional<HetGroups> het;  // the job's components when it is a het job (SLURM_HET_SIZE)

    // Parses a step task's environment. Reads SLURM_STEP_NODELIST (else SLURM_JOB_NODELIST),
    // SLURM_STEP_TASKS_PER_NODE (else SLURM_TASKS_PER_NODE), SLURM_STEP_NUM_TASKS (else
    // SLURM_NTASKS), SLURM_PROCID, SLURM_NODEID, SLURM_LOCALID, SLURM_CPUS_PER_TASK,
    // SLURM_STEP_RESV_PORTS, SLURM_JOB_ID, SLURM_STEP_ID, SLURMD_NODENAME and the het-job
    // components (het_job.h); SLURM_GTIDS, when
    // set, is cross-checked (its element SLURM_LOCALID must be SLURM_PROCID).
    // Errors: kNotFound outside any job; kInvalidArgument in a batch shell (no SLURM_STEP_ID and
    // no SLURM_STEP_NUM_TASKS) or when a variable is malformed or inconsistent; the message
    // names the variable.
    [[nodiscard]] static Result<SlurmEnv> parse(const EnvMap& env);

    // True when the environment belongs to some Slurm job (batch shell or step).
    static bool in_job(const EnvMap& env);
};

}  // namespace psrun::launcher
