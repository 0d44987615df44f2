#include "workerd/barrier.h"

#include "common/pause_detector.h"
#include "common/utf8.h"
#include "workerd/ps_recovery.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <functional>
#include <thread>

namespace psrun::worker {

namespace {

// A fresh client (HELLO to every psd) after psd `shard` restarted, when the options allow it;
// else `failed`.
Result<void> reconnect_after(std::unique_ptr<PsClient>& client, const BarrierOptions& o, std::uint32_t shard,
                             const Error& failed) {
    if (!o.client_options || o.client_options->reconnect_wait.count() <= 0) return tl::unexpected(failed);
    const double wait = static_cast<double>(o.client_options->reconnect_wait.count()) / 1000.0;
    spdlog::warn("start barrier: ps {} ({}) restarted; saying HELLO to every psd again (up to {:g} s) and waiting on",
                 shard, o.client_options->endpoints[shard], wait);
    PSRUN_TRY_ASSIGN(auto fresh, reconnect_all(*o.client_options,
                                               std::chrono::steady_clock::now() + o.client_options->reconnect_wait, o));
    client = std::move(fresh);
    return {};
}

// Polls STATS of every shard until `ready` holds for all of them.
Result<void> poll_until(std::unique_ptr<PsClient>& client, const BarrierOptions& o, const std::string& what,
                        const std::function<Result<bool>(const nlohmann::json&)>& ready) {
    const auto start = std::chrono::steady_clock::now();
    auto next_log = start + std::chrono::seconds(10);
    spdlog::info("start barrier: waiting for {}", what);
    // Each shard's psd instance (STATS "instance", as in WELCOME): a restarted psd answers STATS
    // before it has this worker's HELLO, so a new instance is how a restart shows here.
    std::vector<std::string> instances(o.num_shards);
    while (true) {
        bool all = true;
        for (std::uint32_t shard = 0; shard < o.num_shards; ++shard) {
            auto stats = client->stats(shard);
            const std::string instance = stats ? stats->value("instance", std::string()) : std::string();
            const bool restarted = stats ? !instances[shard].empty() && instance != instances[shard]
                                         : client->restarted_shard().has_value();
            if (restarted) {
                const Error failed =
                    stats ? Error{ErrorCode::kIo, fmt::format("start barrier: ps {} restarted (another psd process "
                                                              "answers; --reconnect-wait 0: fail-fast)",
                                                              shard)}
                          : stats.error();
                if (auto back = reconnect_after(client, o, stats ? shard : *client->restarted_shard(), failed); !back)
                    return back;
                std::fill(instances.begin(), instances.end(), std::string());
                all = false;  // ask every shard again, through the fresh client
                break;
            }
            if (!stats) return tl::unexpected(stats.error());
            instances[shard] = instance;
            PSRUN_TRY_ASSIGN(auto ok, ready(*stats));
            all = all && ok;
        }
        if (all) return {};
        const auto now = std::chrono::steady_clock::now();
        if (now - PauseDetector::process().window_start(start) > o.timeout)  // not our own stopped time
            return make_error(ErrorCode::kTimeout,
                              fmt::format("start barrier: still waiting for {} after {} s", what,
                                          std::chrono::duration_cast<std::chrono::seconds>(o.timeout).count()));
        if (now > next_log) {
            spdlog::info("start barrier: waiting for {}", what);
            next_log = now + std::chrono::seconds(10);
        }
        if (o.watcher && o.watcher->stop_requested())
            return make_error(ErrorCode::kIo, fmt::format("signal {} while waiting for {}", o.watcher->signal(), what));
        std::this_thread::sleep_for(o.poll);
    }
}

}  // namespace

Result<void> wait_for_all_workers(std::unique_ptr<PsClient>& client, const BarrierOptions& o) {
    const std::string what = fmt::format("all {} workers to say HELLO", o.num_workers);
    return poll_until(client, o, what, [&](const nlohmann::json& s) -> Result<bool> {
        // Only a worker that never said HELLO fails the barrier: one that did and then went silent (its network
        // blinked) is attached, and takes its place again when it speaks.
        const auto dead = s.value("workers_missing", nlohmann::json::array());
        if (!dead.empty() && !s.value("initialized", false))
            return make_error(ErrorCode::kTimeout,
                              fmt::format("start barrier: ps {} declared worker(s) {} dead before the start "
                                          "(they never said HELLO): check their logs",
                                          s.value("index", 0), json_text(dead)));
        return s.value("workers_attached", 0u) >= o.num_workers;
    });
}

Result<void> wait_for_init(std::unique_ptr<PsClient>& client, const BarrierOptions& o) {
    return poll_until(client, o, "the chief's INIT",
                      [](const nlohmann::json& s) -> Result<bool> { return s.value("initialized", false); });
}

}  // namespace psrun::worker
