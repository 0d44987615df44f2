#include "workerd/step_loop.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <optional>

#include "common/pause_detector.h"
#include "common/result.h"
#include "workerd/async_exchange.h"
#include "workerd/data/chunk_source.h"
#include "workerd/ps_recovery.h"

namespace psrun::worker {

namespace {
double seconds(Clock::time_point a, Clock::time_point b) { return std::chrono::duration<double>(b - a).count(); }
}  // namespace

StepLoop::StepLoop(StepLoopEnv env, std::uint64_t tag, StepResult last)
    : env_(std::move(env)), tag_(tag), last_(last) {}

void bind_gradient_memory(Trainer& trainer, PsClient& client, bool overlap) {
    std::vector<std::span<float>> regions;
    if (trainer.sparse()) return;  // the table's gradient rows live in the trainer's own buffers
    for (std::uint32_t r = 0; r < (overlap ? 2u : 1u); ++r) regions.push_back(client.gradient_buffer(r));
    if (std::any_of(regions.begin(), regions.end(), [](auto s) { return s.empty(); })) regions.clear();
    trainer.use_gradient_memory(regions);
}

int StepLoop::run(bool overlap) {
    overlap_ = overlap;
    last_stepped_ = Clock::now();
    return overlap ? run_overlapped() : run_blocking();
}

bool StepLoop::signalled() {
    if (!env_.watcher->stop_requested()) return false;
    spdlog::warn("signal {}: stopped after {} steps (global step {})", env_.watcher->signal(), env_.ctx->local_steps,
                 tag_);
    env_.ctx->stopped_by_signal = true;
    return true;
}

int StepLoop::run_blocking() {
    RunContext& ctx = *env_.ctx;
    Trainer& trainer = *ctx.trainer;
    while (!ctx.stop) {
        if (signalled()) break;
        Outcome drawn = Outcome::kStepped;
        Clock::time_point tc;
        const std::optional<float> computed = compute(drawn, tc);
        if (drawn == Outcome::kFailed) return kExitFailure;
        if (drawn == Outcome::kStop) break;
        if (!computed) continue;
        const float loss = *computed;
        env_.hooks->before_step(ctx, loss);
        const auto t1 = Clock::now();
        ctx.compute_seconds += seconds(tc, t1);
        auto step = [&] {
            SignalWatcher::Blocked waiting(*env_.watcher);
            const auto rows = trainer.row_grads();
            if (rows.empty()) return ctx.client->push_pull_frames(trainer.grads().all(), tag_, frames_);
            return ctx.client->exchange(
                Exchange{.grads = trainer.grads().all(), .step = tag_, .row_grads = rows, .params = &frames_});
        }();
        const auto outcome = finish(std::move(step), loss, t1);
        if (outcome == Outcome::kFailed) return kExitFailure;
        if (outcome == Outcome::kStop) break;
    }
    return kExitOk;
}

std::optional<float> StepLoop::compute(Outcome& outcome, Clock::time_point& computing) {
    RunContext& ctx = *env_.ctx;
    Trainer& trainer = *ctx.trainer;
    const auto t0 = Clock::now();
    try {
        if (trainer.sparse()) {  // the batch's rows of the sparse table, fresh from psd
            auto pulled = [&] {
                SignalWatcher::Blocked waiting(*env_.watcher);
                return trainer.pull_rows(*ctx.client);
            }();
            ctx.exchange_seconds += seconds(t0, Clock::now());
            if (!pulled) {
                outcome = finish(tl::unexpected(pulled.error()), 0.0f, t0);
                return std::nullopt;
            }
        }
        computing = Clock::now();
        return trainer.compute_gradients();
    } catch (const ChunkFetchError& e) {  // a CHUNK request met a lost or restarted psd 0
        if (!ctx.client->restarted_shard()) {
            spdlog::error("{} (--ps {})", e.what(), env_.ps);
            outcome = Outcome::kFailed;
            return std::nullopt;
        }
        spdlog::warn("data chunks: the CHUNK request met a restarted psd: recovering as after a PUSH_PULL");
        outcome = finish(tl::unexpected(e.error()), 0.0f, t0);
        return std::nullopt;
    }
}

int StepLoop::run_overlapped() {
    RunContext& ctx = *env_.ctx;
    Trainer& trainer = *ctx.trainer;
    AsyncExchange exchange(*env_.watcher);
    float sent_loss = 0;  // of the gradient in flight
    // Waits for the exchange in flight and handles its reply.
    auto settle = [&] {
        const auto t = Clock::now();
        auto step = exchange.wait();
        return finish(std::move(step), sent_loss, t);
    };
    Outcome outcome = Outcome::kStepped;
    while (!ctx.stop) {
        if (signalled()) break;  // the gradient in flight (if any) is settled below
        const auto t0 = Clock::now();
        const std::uint64_t computed_on = tag_;  // the parameters in the model now
        const float loss = trainer.compute_gradients();
        env_.hooks->before_step(ctx, loss);
        ctx.compute_seconds += seconds(t0, Clock::now());
        if (exchange.in_flight()) {
            outcome = settle();
            if (outcome == Outcome::kFailed) return kExitFailure;
            if (outcome == Outcome::kStop) break;
            if (outcome == Outcome::kRetry) continue;  // the new gradient was computed on lost state
            if (ctx.stop) break;                       // psd's last step: the new gradient is not needed
        }
        // Tagged with the step of the parameters it was computed on, one exchange before tag_.
        exchange.start(*ctx.client, trainer.grads().all(), computed_on, frames_);
        sent_loss = loss;
        trainer.swap_gradient_buffers();
    }
    if (exchange.in_flight()) {  // the last gradient sent: its reply counts (and its hooks run)
        outcome = settle();
        if (outcome == Outcome::kFailed) return kExitFailure;
    }
    return kExitOk;
}

void StepLoop::report_rejoin(const StepInfo& step) const {
    const double timeout_s = static_cast<double>(step.rejoined_timeout_ms) / 1000.0;
    const auto stop = PauseDetector::process().last_stop();
    const std::string why =
        stop ? fmt::format("this worker was stopped for {:.1f} s, longer than --worker-timeout {:g} s", stop->seconds(),
                           timeout_s)
             : fmt::format(
                   "this worker saw no stop of its own: its messages took longer than --worker-timeout {:g} s "
                   "to reach psd",
                   timeout_s);
    spdlog::warn("psd had declared this worker dead ({}); it rejoined the run at global step {}{}", why, step.step,
                 env_.ctx->client->sync() ? " and joins the next sync step" : " and goes on from its data position");
}

StepLoop::Outcome StepLoop::finish(Result<StepInfo> step, float loss, Clock::time_point sent) {
    RunContext& ctx = *env_.ctx;
    Trainer& trainer = *ctx.trainer;
    auto fail = [&](const std::string& what, const Error& e) {
        spdlog::error("{}: {} (--ps {})", what, e.message, env_.ps);
        return Outcome::kFailed;
    };
    // A lost psd that answered again as the same process was reconnected inside the client; one that came back
    // as a new process lost its parameters: restore them.
    if (auto lost = step ? std::nullopt : ctx.client->restarted_shard(); lost && env_.reconnect_wait > 0) {
        frames_ = ParamFrames{};
        auto back = recover_lost_ps(*env_.client_options, *lost, tag_, env_.reconnect_wait, ctx.chief,
                                    env_.checkpointer, *env_.barrier, trainer.params().all());
        if (!back) return fail("recovery from a lost psd", back.error());
        bind_gradient_memory(trainer, *back->client, overlap_);  // the old client's segment goes with it
        *env_.client_owner = std::move(back->client);            // the old client is destroyed: use ctx.client
        ctx.client = env_.client_owner->get();
        tag_ = back->info.step;
        trainer.set_global_step(tag_);
        if (env_.on_restored) env_.on_restored();
        return Outcome::kRetry;
    }
    if (!step && step.error().code == ErrorCode::kRejected) {  // psd dropped and counted it: go on
        spdlog::warn("gradient of global step {} rejected: {}", tag_, step.error().message);
        auto pulled = ctx.client->pull(trainer.params().all());
        if (!pulled) return fail("PULL", pulled.error());
        tag_ = pulled->step;
        return Outcome::kRetry;
    }
    if (!step) return fail(fmt::format("PUSH_PULL at global step {}", tag_), step.error());
    if (step->rejoined) report_rejoin(*step);
    if (step->draining) {  // psd refused the step: preemption
        spdlog::warn("psd is draining: stopped after {} steps (global step {})", ctx.local_steps, step->step);
        ctx.stopped_by_signal = true;
        return Outcome::kStop;
    }
    const auto t2 = Clock::now();
    // The model reads the parameter buffer in place: copy the received slices into it.
    frames_.copy_to(trainer.params().all(), ctx.client->layout());
    const auto t3 = Clock::now();
    ctx.exchange_seconds += seconds(sent, t2);
    ctx.copy_seconds += seconds(t2, t3);
    // Async shards count pushes independently and each stops at exactly last_step: when the first one
    // reports it, another may still be short (its share of a gradient arrived later, or never: a worker
    // lost mid-send). Stepping on until every shard has finished (finished ones refuse the push, the
    // others apply it) ends every shard at last_step, so that the final checkpoint and evaluation hold
    // the model psd ends with.
    if (step->finished && !step->all_finished &&
        ++tail_steps_ <= std::max<std::uint64_t>(64, 4 * static_cast<std::uint64_t>(ctx.num_workers))) {
        frames_.copy_to(trainer.params().all(), ctx.client->layout());
        tag_ = step->step;
        trainer.set_global_step(step->step);
        return Outcome::kRetry;
    }
    if (step->finished && !step->all_finished)
        spdlog::warn("a psd is still short of the last step after {} more steps: the final parameters are as they are",
                     tail_steps_ - 1);
    tag_ = step->step;
    ++ctx.local_steps;
    trainer.set_global_step(step->step);
    last_ = StepResult{step->step, ctx.local_steps, loss, step->finished};
    const auto trained = Clock::now();
    env_.hooks->after_step(ctx, last_);
    // After the hooks: a checkpoint's wait is part of its step. The last step's hooks (the final
    // checkpoint, which is waited for, and evaluation) come after training, not in its steps, and
    // the first step is start-up (the first pull of every parameter, psd creating its tables).
    const auto stepped = Clock::now();
    if (ctx.local_steps > 1) ctx.step_times.add(seconds(last_stepped_, last_.finished ? trained : stepped), step->step);
    last_stepped_ = stepped;
    if (ctx.aborted) return fail(fmt::format("after global step {}", tag_), *ctx.aborted);
    return Outcome::kStepped;
}

}  // namespace psrun::worker
