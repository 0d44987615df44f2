// `workerd --index I --ps EPS --num-workers W [--chief]`: one worker of a parameter-server job.
// It connects to every psd shard (HELLO with the job token), meets the others at the start
// barrier (the chief waits until all W workers said HELLO, then sends INIT with the optimizer
// config and last_step = --steps; the others wait for INIT), then each step computes the
// gradients of its own data shard and does one PUSH_PULL per shard (gradients out, fresh
// parameters in) until psd reports the last step; then DONE. The chief's duties run as hooks
// (workerd/hooks.h, workerd/chief_hooks.h). Call block_termination_signals() first.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common/drain_budget.h"
#include "workerd/ps_recovery.h"
#include "workerd/train_options.h"

namespace psrun::worker {

struct ClusterOptions {
    std::uint32_t index = 0;
    std::string ps;  // comma-separated endpoints, psd i at position i
    std::uint32_t num_workers = 0;
    bool chief = false;
    bool evaluator = false;
    std::string key_file;
    bool no_auth = false;
    std::string auth{to_string(kDefaultAuthMode)};  // --auth mac|curve (with --key-file, on tcp)
    double connect_timeout = 30;   // seconds: HELLO, STATS (DONE waits --step-timeout: psd may be checkpointing)
    double step_timeout = 600;     // seconds: one PUSH_PULL (sync steps wait for the others)
    double barrier_timeout = 600;  // seconds: the start barrier
    // Seconds from SIGTERM/SIGUSR1 to a forced exit 1 (preemption.h); also the drain budget
    // (common/drain_budget.h) that psd gets the same value for.
    double signal_grace = kDefaultSignalGrace;
    FaultOptions faults;  // lost psd, heartbeats, fault injection (workerd/ps_recovery.h)
    // Elastic data (--data-chunks C, workerd/data/chunk_source.h): read the chunks psd 0 leases,
    // C per epoch, instead of the fixed shard; 0: the shard (default).
    std::uint32_t data_chunks = 0;
    // Joining a running job (--join, psrun join; docs/reliability.md "Workers that join"): no
    // --index; psd 0 hands out a slot (JOIN), this worker says HELLO there with the JOIN flag, takes
    // the current parameters and leases data chunks (needs --data-chunks; never the chief).
    bool join = false;
};

// Registers --ps, --num-workers, --chief, --evaluator, --key-file, --no-auth, --auth and the timeouts.
// (--index is registered by main.cpp; it also names the log prefix.)
void add_cluster_options(CLI::App& app, ClusterOptions& options);

class DistributedWorker {
  public:
    DistributedWorker(ClusterOptions cluster, TrainOptions training);
    // Returns the process exit code: 0 after the last step and DONE; 1 when a psd is unreachable
    // or refuses (the message names it) or on a non-finite gradient; kExitPreempted (75) when
    // stopped by a signal or a draining psd after a clean checkpoint (workerd/preemption.h).
    // Throws UsageError on bad options.
    int run();

  private:
    ClusterOptions cluster_;
    TrainOptions training_;
};

}  // namespace psrun::worker
