// Preemption on the worker side (docs/running.md "Preemption and requeue").
//
// A worker stops before the last step when it gets SIGTERM/SIGINT/SIGUSR1 (SignalWatcher) or
// when psd answers a push with kFlagDraining (psd got the signal, or the chief asked it to
// drain). Then:
//  - the chief asks every psd to drain (psd answers once the other workers stopped, so no update
//    is in flight any more, or once the drain budget's hold is over: the chief waits for the
//    answer as long as the budget says, common/drain_budget.h), saves a coordinated
//    checkpoint of every shard at psd's final step (optimizer slots included; the manifest's
//    "extra" records the signal and the data position), sends DONE(preempted) and returns
//    kExitPreempted (75); without --model-dir, or when the save fails, it returns 1;
//  - any other worker sends DONE(preempted) and returns kExitPreempted: the chief's
//    checkpoint is the job's state.
// Data position: a resumed run puts every worker's sampler where its data stream would be after
// the checkpoint's global step G: worker i of W has drawn batches(G) = G / W (+1 when
// i < G mod W) batches in async mode (each global step is one worker's push) and G batches in
// sync mode (every worker pushes once per step); for in-memory data Sampler::seek replays the
// per-epoch shuffles, so the resumed stream is exactly the continuation of the uninterrupted one
// whenever the workers ran at equal rates (always true for W = 1 and in sync mode); streamed
// record files restart in a fresh shuffle instead (BatchSource::seek, docs/data.md).
#pragma once

#include <cstdint>
#include <optional>

#include <nlohmann/json.hpp>

#include "common/ps_client.h"
#include "workerd/hooks.h"
#include "workerd/signal_watcher.h"

namespace psrun::worker {

// Batches worker `index` of `num_workers` has drawn by global step `global_step` (rule above).
std::uint64_t resume_batches(std::uint64_t global_step, std::uint32_t num_workers, std::uint32_t index, bool sync);

// Moves ctx.trainer's data source to where this worker's stream was at `global_step`; logs it.
void resume_data_position(RunContext& ctx, std::uint64_t global_step, bool sync);

// {"rule", "worker", "epoch", "offset", "examples", "exact"}: this worker's data position (for manifests).
nlohmann::json describe_data_position(RunContext& ctx);

// The stop described above; `global_step` is the last step this worker saw. `signal` 0: psd
// asked (draining). Returns the exit code. Runs on the training thread.
int finish_preempted(RunContext& ctx, PsClient& client, SignalWatcher& watcher, std::uint64_t global_step);

}  // namespace psrun::worker
