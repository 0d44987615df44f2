// `psrun local --restart-workers N` (issue 14): the record of every worker psrun started again
// after it died, and how psrun asks psd at which global step that happened. A restarted
// workerd runs its original command line: it says HELLO, finds psd initialised and rejoins
// (async: from its data position; sync: at the next step). The records go into the run's
// <model-dir>/summary.json as "restarts" and into psrun's last lines.
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

struct WorkerRestart {
    std::string worker;                        // "worker 2"
    std::uint32_t index = 0;                   // its --index
    std::string time_utc;                      // when it was restarted, "2026-11-23T14:05:01Z"
    std::string status;                        // "was killed by Killed", "exited with status 1"
    std::optional<std::uint64_t> global_step;  // psd 0's global step at the restart, when it answered
};

class WorkerRestarts {
public:
    explicit WorkerRestarts(int max_restarts) : max_(max_restarts) {}

    // A worker whose death (wait status) psrun may answer with a restart: a training workerd
    // (not an evaluator or standalone worker) killed by a signal or exiting 1, while restarts
    // are left. Exit 0, 2 (usage) and 75 (preempted) are never restarted.
    bool may_restart(const DaemonCommand& command, int status) const;
    // Records a restart of `command` (asks psd for the global step, ~2 s at most); returns it.
    const WorkerRestart& record(const DaemonCommand& command, int status);
    const std::vector<WorkerRestart>& all() const { return restarts_; }
    int max() const { return max_; }

    nlohmann::json to_json() const;
    // Adds "restarts" to <model_dir>/summary.json (replaced atomically); kNotFound without it.
    [[nodiscard]] Result<void> add_to_summary(const std::string& model_dir) const;

private:
    int max_;
    std::vector<WorkerRestart> restarts_;
};

// psd 0's global step (STATS), asked with the endpoints and key file of a worker's command line;
// nullopt when psd does not answer within `timeout_ms`.
std::optional<std::uint64_t> ask_global_step(const DaemonCommand& worker, int timeout_ms);

}  // namespace psrun::launcher
