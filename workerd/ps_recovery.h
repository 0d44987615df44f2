// What a distributed worker does when a psd dies or hangs (issue 6), and its test-only fault
// injection.
//
// Without --ps-restart-wait (the default, 0) a lost psd fails the worker at once: PsClient sees
// the dropped connection (common/ps_health.h) and the worker exits 1 naming the shard and its
// endpoint; `psrun local` then stops the rest. With --ps-restart-wait S every worker instead
// waits up to S seconds for the psd to answer again on the same endpoint (a restarted psd: by
// hand, by Slurm, by a supervisor), with a fresh PsClient; then
//   - the chief finds a shard uninitialised and restores EVERY shard from the newest valid
//     checkpoint in --model-dir (all shards, not only the lost one: the shards stay consistent,
//     the steps since that checkpoint are lost and redone);
//   - the others wait until every shard is initialised at one common global step, then PULL.
// Meanwhile each retry's HELLO counts as a sign of life at the surviving psds.
#pragma once

#include <cstdint>
#include <memory>
#include <span>

#include <CLI/CLI.hpp>

#include "common/checkpointer.h"
#include "common/ps_client.h"
#include "common/result.h"
#include "workerd/barrier.h"
#include "workerd/hooks.h"

namespace psrun::worker {

struct FaultOptions {
    double ps_restart_wait = 0;     // seconds; 0: a lost psd fails the worker
    double heartbeat_timeout = 10;  // seconds of missed ZMTP heartbeats before a psd counts as lost
    int inject_nan_every = 0;       // test only: every K-th local step pushes a NaN gradient
};

// Registers --ps-restart-wait, --heartbeat-timeout and the hidden --inject-nan-every.
void add_fault_options(CLI::App& app, FaultOptions& options);

struct Recovered {
    std::unique_ptr<PsClient> client;  // connected, HELLO done
    StepInfo info;                     // from the PULL into `params`
};

// After `lost` (the client's lost shard) at global step `step`: waits for every psd, restores
// (chief) or waits for the restore (others), then PULLs into params. `checkpointer` is the
// chief's (nullptr elsewhere, or without --model-dir: then the chief cannot restore and fails).
[[nodiscard]] Result<Recovered> recover_lost_ps(const PsClientOptions& client_options, std::uint32_t lost,
                                                std::uint64_t step, double wait_seconds, bool chief,
                                                Checkpointer* checkpointer, const BarrierOptions& barrier,
                                                std::span<float> params);

// Test only: a hook (run after NanGuard) that turns the gradient into NaN every K-th local step.
std::unique_ptr<Hook> make_nan_injector(int every);

}  // namespace psrun::worker
