// `psrun local --restart-workers N` (issue 14) and `--restart-ps N` (issue 38): the record of
// every daemon psrun started again after it died, and how psrun asks psd at which global step
// that happened. A restarted daemon runs its original command line on the same endpoint:
//  - a workerd says HELLO, finds psd initialised and rejoins (async: from its data position;
//    sync: at the next step);
//  - a psd starts empty; the workers (--reconnect-wait > 0) see another psd process answer on
//    that endpoint and the chief restores every shard from the newest checkpoint in the model dir.
// The records go into the run's <model-dir>/summary.json as "restarts" and into psrun's last lines.
// Not thread-safe (the supervisor's thread).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "launcher/daemon_command.h"

namespace psrun::launcher {

// How a child ended, from its wait status: "exited with status 1", "was killed by Killed".
std::string describe_wait_status(int status);

struct DaemonRestart {
    std::string role;                          // "worker" or "ps"
    std::string label;                         // "worker 2", "ps 1"
    std::uint32_t index = 0;                   // its --index
    std::string time_utc;                      // when it was restarted, "2026-11-23T14:05:01Z"
    std::string status;                        // "was killed by Killed", "exited with status 1"
    std::optional<std::uint64_t> global_step;  // a live psd's global step at the restart, when it answered
};

class DaemonRestarts {
  public:
    // At most `max_workers` worker restarts and `max_ps` psd restarts in all.
    DaemonRestarts(int max_workers, int max_ps) : max_workers_(max_workers), max_ps_(max_ps) {}

    // A daemon whose death (wait status) psrun may answer with a restart: a training workerd
    // (not an evaluator or standalone worker) or a psd, killed by a signal or exiting 1, while
    // restarts of its role are left. Exit 0, 2 (usage) and 75 (preempted) are never restarted.
    bool may_restart(const DaemonCommand& command, int status) const;
    // Records a restart of `command`; returns it. The global step is asked (~2 s at most) of
    // psd 0 with the endpoints and key of `command`'s own line (workerd and psd both name every
    // psd); of psd 1 when psd 0 is the one that died; of nobody when no other psd is left.
    const DaemonRestart& record(const DaemonCommand& command, int status);
    const std::vector<DaemonRestart>& all() const { return restarts_; }
    int used(const DaemonCommand& command) const;
    int max(const DaemonCommand& command) const { return is_ps(command) ? max_ps_ : max_workers_; }
    // "--restart-ps" or "--restart-workers": the option that allows `command`'s restarts.
    static const char* option(const DaemonCommand& command);

    nlohmann::json to_json() const;
    // Adds "restarts" to <model_dir>/summary.json (replaced atomically); kNotFound without it.
    [[nodiscard]] Result<void> add_to_summary(const std::string& model_dir) const;

  private:
    static bool is_ps(const DaemonCommand& command) { return command.program == "psd"; }

    int max_workers_;
    int max_ps_;
    std::vector<DaemonRestart> restarts_;
};

// Shard `shard`'s global step (STATS), asked with the endpoints (--ps) and key file of a
// daemon's command line; nullopt when that psd does not answer within `timeout_ms`.
std::optional<std::uint64_t> ask_global_step(const DaemonCommand& daemon, std::uint32_t shard, int timeout_ms);

}  // namespace psrun::launcher
