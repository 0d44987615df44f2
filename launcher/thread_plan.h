// How many oneDNN/OpenMP threads each daemon gets when the user did not say (--threads), and
// the warning when a configuration asks for more compute threads than there are cores.
// Pure functions of the counts except affinity_cpu_count(), which main() calls once.
#pragma once

#include <optional>
#include <string>

namespace psrun::launcher {

// CPUs in this process's affinity mask (sched_getaffinity, CPU_COUNT): what taskset, srun's
// binding or a cgroup cpuset leave to psrun and its children. 0 when the call fails.
int affinity_cpu_count();

struct ThreadPlan {
    int worker_threads = 1;         // each workerd: workers and evaluators
    int ps_threads = 1;             // each psd
    bool explicit_threads = false;  // from --threads T (then both are T)
};

// psrun local: --threads T gives every daemon T. Otherwise each workerd gets
// floor(cores / workers), at least 1, and each psd 1 (its poll loop idles while the workers
// compute: docs/architecture.md "Threads"). cores <= 0 (unknown) counts as 1.
ThreadPlan local_thread_plan(std::optional<int> threads, int cores, int num_workers);

// psrun local's first log line about threads, e.g. "2 cores in this process's affinity mask:
// 1 thread per worker (2 workers), 1 per psd; --threads T overrides".
std::string describe_thread_plan(const ThreadPlan& plan, int cores, int num_workers, int num_ps);

// Compute threads of a local run: workers x worker_threads, plus each psd's threads beyond its
// first (the poll-loop thread idles while the workers compute; the extra team threads split
// the gradient passes and do compete). Evaluators are not counted: they compute between
// checkpoints only.
int local_compute_threads(const ThreadPlan& plan, int num_workers, int num_ps);

// The warning when local_compute_threads() > cores (cores > 0), naming the numbers and the fix;
// nullopt when the run fits.
std::optional<std::string> local_oversubscription(const ThreadPlan& plan, int cores, int num_workers, int num_ps);

// psrun run: a task whose daemon gets more threads than its affinity mask has cores (e.g.
// SLURM_CPUS_PER_TASK or --threads above what srun bound) is oversubscribed; nullopt otherwise
// or when either count is unknown.
std::optional<std::string> task_oversubscription(std::optional<int> threads, int cores);

}  // namespace psrun::launcher
