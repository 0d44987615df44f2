// The distributed worker's training loop, after the start barrier: compute a gradient, exchange
// it with psd (PUSH_PULL: gradient out, fresh parameters in), copy the parameters into the
// model, run the hooks; until psd reports the last step, a hook stops, a signal or a draining
// psd stops (ctx.stopped_by_signal), or something fails. psd's last step is when every shard has
// reported it: async shards count pushes on their own, and the loop steps on (without hooks) while
// one is still short, so that every shard ends at exactly last_step.
//
// Two schedules:
//   blocking    compute k, exchange k, copy, hooks, compute k+1, ...   (sync mode, --overlap off)
//   overlapped  compute k+1 while exchange k runs on a communication thread (workerd/async_exchange.h);
//               then wait for it, copy its parameters, run the hooks for step k, send k+1. The
//               gradient buffers alternate (Trainer::swap_gradient_buffers), so the one in flight is
//               never overwritten. Step k+1 is computed on parameters one exchange older than in the
//               blocking loop (staleness +1, async mode only). Hooks, recovery, PULL and the
//               preemption checkpoint run only when no exchange is in flight; a gradient computed
//               when psd reports the last step is dropped (psd would refuse it: no overshoot).
// A restarted psd (with --reconnect-wait) replaces ctx.client and *client_owner, also when a CHUNK
// request of the batch met it (ChunkFetchError); a rejected gradient (psd dropped a non-finite one)
// is followed by a PULL; both drop a gradient not yet sent.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "common/checkpointer.h"
#include "common/ps_client.h"
#include "workerd/barrier.h"
#include "workerd/hooks.h"
#include "workerd/signal_watcher.h"

namespace psrun::worker {

struct StepLoopEnv {
    SignalWatcher* watcher = nullptr;
    HookList* hooks = nullptr;
    RunContext* ctx = nullptr;                          // ctx->client is the client to use
    std::unique_ptr<PsClient>* client_owner = nullptr;  // replaced after a psd restart
    const PsClientOptions* client_options = nullptr;
    const BarrierOptions* barrier = nullptr;
    Checkpointer* checkpointer = nullptr;  // the chief's, or nullptr
    double reconnect_wait = 0;             // seconds (0: a lost psd fails the worker)
    std::string ps;                        // --ps, for error messages
    // Called after the shards were restored from a checkpoint (a restarted psd): data positions
    // held outside psd (the chunks leased from psd 0, workerd/data/chunk_source.h) are void.
    std::function<void()> on_restored;
};

// Lets the trainer compute gradients straight into the client's shared-memory regions (one, or
// two when overlapping), or into its own buffers when the client has none: call after hello()
// and whenever the client is replaced, before the old client is destroyed.
void bind_gradient_memory(Trainer& trainer, PsClient& client, bool overlap);

class StepLoop {
  public:
    // `tag`: global step of the parameters in the model now; `last`: the result reported to
    // the hooks' end() when no step runs.
    StepLoop(StepLoopEnv env, std::uint64_t tag, StepResult last);

    // Returns kExitOk when the loop ended (last step, hook stop, or ctx->stopped_by_signal),
    // kExitFailure after logging why it failed. Hooks may throw (the worker exits 1).
    int run(bool overlap);
    // Global step of the parameters in the model after run().
    std::uint64_t tag() const { return tag_; }
    const StepResult& last() const { return last_; }

  private:
    enum class Outcome { kStepped, kRetry, kStop, kFailed };
    int run_blocking();
    int run_overlapped();
    // True (and logs, sets ctx->stopped_by_signal) when a stop signal arrived.
    bool signalled();
    // Handles the reply to the gradient computed at tag_: copies the parameters and runs the
    // after_step hooks (kStepped), recovers or re-pulls (kRetry), or ends the loop.
    Outcome finish(Result<StepInfo> step, float loss, Clock::time_point sent);
    // Computes the gradient (with the batch's rows first, for a sparse table; `computing` is when
    // the computation began); nullopt with `outcome` set when the batch could not be drawn or
    // pulled (a lost psd: see finish()).
    std::optional<float> compute(Outcome& outcome, Clock::time_point& computing);
    // Logs that psd had declared this worker dead and took it back (issue 14), with what this
    // process observed of its own stops.
    void report_rejoin(const StepInfo& step) const;

    StepLoopEnv env_;
    bool overlap_ = false;
    std::uint64_t tag_;
    StepResult last_;
    ParamFrames frames_;
    std::uint64_t tail_steps_ = 0;    // steps after the first shard reported the last step (finish())
    Clock::time_point last_stepped_;  // the end of the last step (ctx->step_times)
};

}  // namespace psrun::worker
