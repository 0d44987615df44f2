// The start barrier, built on psd's STATS replies so that psd needs no barrier of its own:
//   chief:  wait_for_all_workers() until every shard has seen HELLO from all --num-workers
//           workers, then sends INIT;
//   others: wait_for_init() until every shard holds parameters, then PULL.
// Both poll every shard (each STATS counts as a sign of life for psd's worker timeout, so a
// long wait never gets a waiting worker declared dead). Blocking; call from the training thread.
// A psd that restarts during the wait (another process answers on its endpoint: PsClient with
// --reconnect-wait > 0 sees it as restarted) is met with a fresh client, built from
// BarrierOptions::client_options, that says HELLO to every psd again; the wait then goes on as
// before (the restarted psd counts this worker from that HELLO). Without client_options, or with
// --reconnect-wait 0 (a lost psd is an error), the wait fails as the request did.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>

#include "common/ps_client.h"
#include "common/result.h"
#include "workerd/signal_watcher.h"

namespace psrun::worker {

struct BarrierOptions {
    std::uint32_t num_shards = 1;
    std::uint32_t num_workers = 1;
    std::chrono::milliseconds timeout{600000};
    std::chrono::milliseconds poll{100};
    const SignalWatcher* watcher = nullptr;           // a termination signal ends the wait with an error
    const PsClientOptions* client_options = nullptr;  // a fresh client after a psd restart (null: none)
};

// Returns once every shard reports workers_attached >= num_workers. Errors: a shard reports a
// dead worker (it never said HELLO within psd's --init-timeout), the timeout, a signal, or a
// failed STATS (the message names the psd). `client` (not null) is replaced after a psd restart.
[[nodiscard]] Result<void> wait_for_all_workers(std::unique_ptr<PsClient>& client, const BarrierOptions& options);

// Returns once every shard reports initialized (the chief's INIT arrived). `client` as above.
[[nodiscard]] Result<void> wait_for_init(std::unique_ptr<PsClient>& client, const BarrierOptions& options);

}  // namespace psrun::worker
