// What a distributed worker does when a psd is lost (docs/reliability.md), and its test-only
// fault injection.
//
// A lost psd is waited for inside PsClient (--reconnect-wait, default kDefaultReconnectWait; see
// common/ps_client_reconnect.cpp): when the same psd process answers again (a network that
// blinked, a psd that was stopped) the request goes on and nothing is restored. This file handles
// the other outcome, a psd that answers again as a new process (restarted by hand, by Slurm, by a
// supervisor): with a fresh PsClient
//   - the chief finds a shard uninitialised and restores EVERY shard from the newest valid
//     checkpoint in --model-dir (all shards, not only the lost one: the shards stay consistent,
//     the steps since that checkpoint are lost and redone);
//   - the others wait until every shard is initialised at one common global step, then PULL.
// With --reconnect-wait 0 a lost psd fails the worker at once (exit 1, naming the shard).
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
    double reconnect_wait = static_cast<double>(kDefaultReconnectWait.count());  // seconds; 0: fail at once
    bool deprecated_restart_wait = false;  // given as --ps-restart-wait (the old name)
    double heartbeat_timeout = 10;         // seconds of missed ZMTP heartbeats before a psd counts as lost
    int inject_nan_every = 0;              // test only: every K-th local step pushes a NaN gradient
};

// Registers --reconnect-wait (and its old name --ps-restart-wait, hidden), --heartbeat-timeout and
// the hidden --inject-nan-every.
void add_fault_options(CLI::App& app, FaultOptions& options);

struct Recovered {
    std::unique_ptr<PsClient> client;  // connected, HELLO done
    StepInfo info;                     // from the PULL into `params`
};

// A fresh client that got WELCOME from every psd, retrying (short HELLO timeouts) until `deadline`
// or a stop signal of barrier.watcher; a psd that answers and refuses ends the wait at once.
[[nodiscard]] Result<std::unique_ptr<PsClient>> reconnect_all(const PsClientOptions& client_options,
                                                              std::chrono::steady_clock::time_point deadline,
                                                              const BarrierOptions& barrier);

// After `lost` (the client's restarted shard) at global step `step`: waits for every psd, restores
// (chief) or waits for the restore (others), then PULLs into params. `checkpointer` is the
// chief's (nullptr elsewhere, or without --model-dir: then the chief cannot restore and fails).
// A psd that restarts again meanwhile (killed twice in a row) starts the recovery over with a
// fresh client, until `wait_seconds` from the call are over.
[[nodiscard]] Result<Recovered> recover_lost_ps(const PsClientOptions& client_options, std::uint32_t lost,
                                                std::uint64_t step, double wait_seconds, bool chief,
                                                Checkpointer* checkpointer, const BarrierOptions& barrier,
                                                std::span<float> params);

// Test only: a hook (run after NanGuard) that turns the gradient into NaN every K-th local step.
std::unique_ptr<Hook> make_nan_injector(int every);

}  // namespace psrun::worker
