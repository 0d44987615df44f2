#include "workerd/preemption.h"

#include <spdlog/spdlog.h>

#include "common/drain_budget.h"
#include "common/exit_codes.h"

namespace psrun::worker {

namespace {

double ms_between(Clock::time_point a, Clock::time_point b) {
    return std::chrono::duration<double, std::milli>(b - a).count();
}

bool save_preemption_checkpoint(RunContext& ctx, PsClient& client, std::uint64_t step, int sig, Clock::time_point since,
                                const std::string& why) {
    const auto t0 = Clock::now();
    auto saved = ctx.checkpointer->save(client, step,
                                        {{"workers", ctx.num_workers},
                                         {"chief_local_steps", ctx.local_steps},
                                         {"label_smoothing", ctx.options->label_smoothing},
                                         {"preempted", true},
                                         {"signal", sig},
                                         {"data_position", describe_data_position(ctx)}});
    const auto t1 = Clock::now();
    if (!saved) {
        spdlog::error(
            "preempted ({}): the checkpoint at global step {} failed: {}; the previous checkpoint stays "
            "valid",
            why, step, saved.error().message);
        return false;
    }
    spdlog::warn("preempted ({}): checkpoint {} at global step {} committed {:.0f} ms after the {} (save {:.0f} ms)",
                 why, saved->dir, step, ms_between(since, t1), sig ? "signal" : "drain notice", ms_between(t0, t1));
    if (ctx.metrics)
        ctx.metrics->write(static_cast<std::int64_t>(step), {{"checkpoint", saved->dir}, {"preempted", true}});
    return true;
}

}  // namespace

std::uint64_t resume_batches(std::uint64_t global_step, std::uint32_t num_workers, std::uint32_t index, bool sync) {
    if (sync || num_workers <= 1) return global_step;
    return global_step / num_workers + (index < global_step % num_workers ? 1 : 0);
}

void resume_data_position(RunContext& ctx, std::uint64_t global_step, bool sync) {
    if (global_step == 0) return;
    const auto batches = resume_batches(global_step, ctx.num_workers, ctx.index, sync);
    auto& data = ctx.trainer->data();
    data.seek(batches * static_cast<std::uint64_t>(examples_per_update(*ctx.options)));  // micro-batches included
    const DataPosition at = data.position();
    if (at.exact)
        spdlog::info(
            "data position: resuming at epoch {} offset {} of this worker's shard ({} batches drawn by "
            "global step {}, {} mode)",
            at.epoch, at.offset, batches, global_step, sync ? "sync" : "async");
    else
        spdlog::info(
            "data position: {} batches drawn by global step {} ({} mode); the streamed files restart in a "
            "fresh shuffle (docs/data.md, \"Resuming a stream\")",
            batches, global_step, sync ? "sync" : "async");
}

nlohmann::json describe_data_position(RunContext& ctx) {
    const DataPosition at = ctx.trainer->data().position();
    return {{"rule", "batches drawn by worker i of W at global step G: G/W (+1 if i < G mod W) async, G sync"},
            {"worker", ctx.index},
            {"epoch", at.epoch},
            {"offset", at.offset},
            {"examples", at.examples},
            {"exact", at.exact}};
}

int finish_preempted(RunContext& ctx, PsClient& client, SignalWatcher& watcher, std::uint64_t global_step) {
    const int sig = watcher.signal();
    const auto since = sig ? watcher.signal_time() : Clock::now();
    const std::string why = sig ? fmt::format("signal {}", sig) : std::string("psd is draining");
    int code = kExitPreempted;
    if (ctx.chief && ctx.checkpointer) {
        std::uint64_t step = global_step;
        {
            // psd holds the answer until the other workers stopped, at most the budget's hold.
            const DrainBudget budget{watcher.deadline()};
            spdlog::info("preempted ({}): asking psd to drain ({})", why, budget.describe());
            SignalWatcher::Blocked waiting(watcher, budget.reply_wait());
            auto drained = client.drain();
            if (drained) step = *drained;
            else spdlog::error("drain request: {} (saving anyway)", drained.error().message);
        }
        if (ctx.checkpointer->last_saved_step() == step) {  // psd drained: nothing changed since that save
            spdlog::warn("preempted ({}): the checkpoint at global step {} already holds psd's final state", why, step);
        } else if (!save_preemption_checkpoint(ctx, client, step, sig, since, why)) {
            code = kExitFailure;
        }
    } else if (ctx.chief) {
        spdlog::error("preempted ({}) at global step {}: no --model-dir, so no checkpoint: this run's progress is lost",
                      why, global_step);
        code = kExitFailure;
    } else {
        spdlog::warn("preempted ({}) at global step {} after {} steps of this worker", why, global_step,
                     ctx.local_steps);
    }
    SignalWatcher::Blocked waiting(watcher);
    if (auto done = client.done(true); !done) {
        spdlog::error("DONE: {}", done.error().message);
        code = kExitFailure;
    }
    return code;
}

}  // namespace psrun::worker
