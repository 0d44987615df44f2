// Configuration of one psd, built from its command line (psd/main.cpp) or by tests.
#pragma once

#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/job_keys.h"
#include "common/message_auth.h"

namespace psrun::psd {

struct ServerOptions {
    std::uint32_t index = 0;
    std::vector<std::string> endpoints;  // --ps; this psd binds endpoints[index]
    std::uint32_t num_workers = 1;
    // Elastic membership (--max-workers M, psrun join): slots num_workers..M-1 are for workers that
    // join the running job (psd 0 hands them out on JOIN, psd/join_slots.h); 0: as many as num_workers.
    std::uint32_t max_workers = 0;
    std::string model_dir;                  // standby: ps-<i>.endpoint and ps-<i>.shard live here
    std::optional<JobKeys> keys;            // nullopt: --no-auth (no CURVE)
    std::uint64_t token = 0;                // expected job token (keys->token when keys are set)
    AuthMode auth = kDefaultAuthMode;       // with keys, on tcp: CURVE or a MAC on every message
    std::chrono::seconds auth_window{300};  // --auth mac: allowed clock difference (common/message_auth.h)
    bool standby = false;
    std::chrono::milliseconds worker_timeout{60000};
    // How long a worker declared dead keeps its place (its network may have blinked, or it was
    // stopped, and it may speak again): psd finishes the run without it only once it has been
    // dead this long (never while draining). 0: at once. psd's command line defaults to
    // kDefaultReconnectWait (common/ps_health.h), the time a worker waits for a lost psd.
    std::chrono::milliseconds reconnect_wait{0};
    // PULLs wait this long for the chief's INIT; a worker of the map that has not said HELLO this
    // long after start is declared dead (not in standby).
    std::chrono::milliseconds init_timeout{300000};
    bool sync = false;
    std::uint32_t replicas_to_aggregate = 0;  // sync: gradients averaged per step
    // Sync with asynchronous tables (--async-tables; Persia's hybrid): the dense tensors wait for
    // the step's gradients as with sync, each push's sparse rows are applied when it arrives (not
    // averaged over the replicas; a stale or backup push's rows too). Needs sync.
    bool async_tables = false;
    std::uint32_t backup_workers = 0;
    std::uint32_t straggler_every = 100;  // sync: steps between straggler reports
    int threads = 1;                      // threads for the finite check and the optimizer update
    // Preemption: after a signal (or the chief's drain request) psd waits this long for the
    // chief's checkpoint and every worker's DONE before it exits anyway (psd/drain.h).
    std::chrono::milliseconds signal_grace{8000};
    // Elastic membership (--min-workers K, docs/reliability.md "Elastic membership"); 0: off. A
    // worker declared dead is dropped (its data chunks go back to the queue, sync steps aggregate
    // over the rest) instead of failing the run: psd exits 0 when at least K workers finished and
    // the chief (which checkpoints) was never lost; the run is aborted once fewer than K are left.
    std::uint32_t min_workers = 0;
    // Async: a worker's reply waits while it is more than S gradients ahead of the slowest live
    // worker (psd/staleness_bound.h); nullopt: no bound. Not with sync.
    std::optional<std::uint32_t> max_staleness;
    // Who writes a SAVE's checkpoint (--checkpoint-writer): a thread of psd from a row snapshot
    // (psd/row_snapshot.h) or a forked child from a copy-on-write snapshot (psd/forked_task.h),
    // both while the poll loop keeps serving, or the poll loop itself (every worker waits). kAuto:
    // the thread where the shard holds sparse tables, else the child.
    enum class CheckpointWriter { kAuto, kThread, kFork, kLoop };
    CheckpointWriter checkpoint_writer = CheckpointWriter::kAuto;
    // Differential checkpoints (--checkpoint-full-every N): of every N checkpoints this shard
    // writes, one holds its sparse tables whole and the others only their blocks of rows changed
    // since that one (common/row_delta.h), while that one is committed; 1: every one whole.
    // Tables keyed by raw ids, dense tensors and runs with --ema-decay are always written whole.
    std::uint32_t checkpoint_full_every = 5;
    std::uint64_t max_bad_grads = 100;  // rejected non-finite gradients before the run is aborted; 0: no limit
};

}  // namespace psrun::psd
