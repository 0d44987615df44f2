#include "workerd/ps_recovery.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <limits>
#include <thread>

#include "common/clock.h"
#include "common/option_checks.h"

namespace psrun::worker {

namespace {

using Clock = std::chrono::steady_clock;

// Non-chief: every shard initialised, all at the same global step (the chief's RESTORE is done).
Result<void> wait_for_restore(PsClient& client, const BarrierOptions& barrier) {
    const auto deadline = Clock::now() + barrier.timeout;
    while (true) {
        bool ready = true;
        std::uint64_t first_step = std::numeric_limits<std::uint64_t>::max();
        for (std::uint32_t shard = 0; shard < barrier.num_shards && ready; ++shard) {
            PSRUN_TRY_ASSIGN(auto stats, client.stats(shard));
            const auto step = stats.value("step", std::uint64_t{0});
            ready = stats.value("initialized", false) && (shard == 0 || step == first_step);
            if (shard == 0) first_step = step;
        }
        if (ready) return {};
        if (Clock::now() > deadline)
            return make_error(ErrorCode::kTimeout, "the chief did not restore the psd shards in time");
        if (barrier.watcher && barrier.watcher->stop_requested())
            return make_error(ErrorCode::kIo, fmt::format("signal {} while waiting for the chief's restore",
                                                          barrier.watcher->signal()));
        std::this_thread::sleep_for(barrier.poll);
    }
}

class NanInjector : public Hook {
  public:
    explicit NanInjector(int every) : every_(every) {}
    void before_step(RunContext& ctx, float /*loss*/) override {
        // Once per K-th step: the retry after psd refused the NaN is a clean gradient.
        if ((ctx.local_steps + 1) % static_cast<std::uint64_t>(every_) != 0 || ctx.local_steps + 1 == injected_) return;
        injected_ = ctx.local_steps + 1;
        ctx.trainer->grads().all()[0] = std::numeric_limits<float>::quiet_NaN();
        spdlog::warn("--inject-nan-every {}: pushing a NaN gradient at local step {}", every_, ctx.local_steps + 1);
    }

  private:
    int every_;
    std::uint64_t injected_ = 0;  // the local step the last NaN was pushed for
};

}  // namespace

Result<std::unique_ptr<PsClient>> reconnect_all(const PsClientOptions& o, Clock::time_point deadline,
                                                const BarrierOptions& barrier) {
    Error last{ErrorCode::kTimeout, "no attempt"};
    while (Clock::now() < deadline) {
        if (barrier.watcher && barrier.watcher->stop_requested())
            return make_error(ErrorCode::kIo, fmt::format("signal {} while waiting for the psd to come back",
                                                          barrier.watcher->signal()));
        const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        PsClientOptions probe_options = o;  // short HELLO timeout while psd is away
        probe_options.connect_timeout =
            std::clamp(left, std::chrono::milliseconds(100), std::chrono::milliseconds(1000));
        auto hello = PsClient(probe_options).hello();
        if (hello) {  // every psd is back: the real client keeps the normal timeouts
            auto client = std::make_unique<PsClient>(o);
            hello = client->hello();
            if (hello) return client;
        }
        if (hello.error().code != ErrorCode::kTimeout && hello.error().code != ErrorCode::kIo)
            return tl::unexpected(hello.error());  // a psd answered and refused: waiting will not help
        last = hello.error();
    }
    return make_error(ErrorCode::kTimeout, "gave up waiting (--reconnect-wait): " + last.message);
}

void add_fault_options(CLI::App& app, FaultOptions& o) {
    app.add_option("--reconnect-wait", o.reconnect_wait,
                   "seconds to wait for a lost psd (no answer for --heartbeat-timeout, or its connection closed) "
                   "to answer again: the same psd goes on where it was, a restarted one is restored by the chief "
                   "from the newest checkpoint; 0: a lost psd fails the worker at once")
        ->check(seconds_at_least(0))
        ->capture_default_str();
    app.add_option("--ps-restart-wait", o.reconnect_wait, "old name of --reconnect-wait")
        ->group("")
        ->check(hidden_option_check("--ps-restart-wait", seconds_at_least(0)))
        ->each([&o](const std::string&) { o.deprecated_restart_wait = true; });
    app.add_option("--heartbeat-timeout", o.heartbeat_timeout,
                   "seconds without a ZMTP heartbeat answer before a psd counts as lost (a psd that dies is "
                   "seen at once); 0: no heartbeats")
        ->check(number_in(0, 86400, "seconds"))
        ->capture_default_str();
    app.add_option("--inject-nan-every", o.inject_nan_every)
        ->group("")
        ->check(hidden_option_check("--inject-nan-every", integer_in(0, 1000000000)));
}

namespace {

// One try of recover_lost_ps() on a fresh `client`: the restore (chief) or the wait for it.
Result<void> restore_or_wait(PsClient& client, std::uint32_t lost, std::uint64_t step, bool chief,
                             Checkpointer* checkpointer, const BarrierOptions& barrier) {
    if (chief && !client.servers_initialized()) {
        if (!checkpointer)
            return make_error(ErrorCode::kNotFound, "ps " + std::to_string(lost) +
                                                        " came back empty and there is no --model-dir to restore "
                                                        "it from");
        PSRUN_TRY_ASSIGN(auto restored, checkpointer->restore(client));
        if (!restored)
            return make_error(ErrorCode::kNotFound, "ps " + std::to_string(lost) +
                                                        " came back empty and no checkpoint was written yet: "
                                                        "cannot continue (lower --checkpoint-steps/-secs)");
        spdlog::warn("ps {} restarted: restored every shard from {} at global step {}: {} steps lost", lost,
                     restored->dir, restored->step, step >= restored->step ? step - restored->step : 0);
        return {};
    }
    if (!chief) return wait_for_restore(client, barrier);
    return {};
}

}  // namespace

Result<Recovered> recover_lost_ps(const PsClientOptions& client_options, std::uint32_t lost, std::uint64_t step,
                                  double wait_seconds, bool chief, Checkpointer* checkpointer,
                                  const BarrierOptions& barrier, std::span<float> params) {
    const auto started = Clock::now();
    const auto deadline = started + to_milliseconds(wait_seconds);
    spdlog::warn("ps {} ({}) restarted at global step {}: reconnecting to every psd (up to {:g} s)", lost,
                 client_options.endpoints[lost], step, wait_seconds);
    for (;;) {
        PSRUN_TRY_ASSIGN(auto client, reconnect_all(client_options, deadline, barrier));
        spdlog::info("every psd answers again after {:.1f} s",
                     std::chrono::duration<double>(Clock::now() - started).count());
        auto done = restore_or_wait(*client, lost, step, chief, checkpointer, barrier);
        if (done) {
            auto pulled = client->pull(params);
            if (pulled) {
                spdlog::info("recovered from the loss of ps {} in {:.1f} s: continuing from global step {}", lost,
                             std::chrono::duration<double>(Clock::now() - started).count(), pulled->step);
                return Recovered{std::move(client), *pulled};
            }
            done = tl::unexpected(pulled.error());
        }
        // A psd restarted again meanwhile (killed twice in a row): this client's view of it is
        // stale; start over with a fresh one while the wait lasts.
        const auto again = client->restarted_shard();
        if (!again || Clock::now() >= deadline) return tl::unexpected(done.error());
        spdlog::warn("ps {} restarted again while recovering: reconnecting to every psd once more", *again);
        lost = *again;
    }
}

std::unique_ptr<Hook> make_nan_injector(int every) { return std::make_unique<NanInjector>(every); }

}  // namespace psrun::worker
