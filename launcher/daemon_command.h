// The daemon command lines derived from a cluster map: the only place that knows the psd and
// workerd flag contracts (docs/architecture.md). Pure functions except daemon_path().
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/cluster_map.h"
#include "common/result.h"
#include "launcher/env_map.h"

namespace psrun::launcher {

// Options that psrun forwards to the daemons.
struct DaemonOptions {
    std::string bin_dir;   // --bin-dir; else PSRUN_BIN_DIR; else next to psrun
    std::string key_file;  // --key-file F (psd and workerd)
    bool no_auth = false;  // --no-auth (psd and workerd)
    std::string auth;      // --auth mac|curve (psd and workerd, with a key file); empty: their default
    bool sync = false;     // psd: --sync
    std::optional<int> replicas_to_aggregate;
    std::optional<int> backup_workers;
    bool async_tables = false;                 // psd: --async-tables (with --sync)
    bool standby = false;                      // psd: --standby
    std::optional<double> worker_timeout;      // psd: --worker-timeout SECONDS
    std::optional<long> max_bad_grads;         // psd: --max-bad-grads N
    std::optional<int> min_workers;            // psd: --min-workers K (elastic membership)
    std::optional<int> max_workers;            // psd: --max-workers M (room for workers that join: psrun join)
    std::optional<int> max_staleness;          // psd: --max-staleness S (async bounded staleness)
    std::string checkpoint_writer;             // psd: --checkpoint-writer auto|thread|fork|loop; empty: its default
    std::optional<int> checkpoint_full_every;  // psd: --checkpoint-full-every N (differential sparse checkpoints)
    // psd and workerd: --reconnect-wait SECONDS (how long a silent peer may take to come back);
    // nullopt: their default (kDefaultReconnectWait).
    std::optional<double> reconnect_wait;
    std::string log_level;  // psd: --log-level
    // psd: --threads, in place of map.threads (psrun local's default gives psd 1 thread and each
    // workerd a share of the cores); nullopt: map.threads for every daemon.
    std::optional<int> ps_threads;
    // psd and workerd: --run-id (the model dir lock, common/model_dir_lock.h); empty: not passed.
    std::string run_id;
    std::vector<std::string> training;  // after "--": workerd training options
};

struct DaemonCommand {
    std::string label;              // "ps 0", "worker 1", "evaluator 0", "standalone worker"
    std::string program;            // "psd" or "workerd"
    std::string path;               // filled by the caller (daemon_path); empty until then
    std::vector<std::string> argv;  // argv[0] is the program name
};

// The command for the task (role, index) of `map`. A map without ps and with exactly one worker
// (and no evaluator) runs that worker as `workerd --standalone`.
// REQUIRES: map.validate() is empty and (role, index) exists in the map.
[[nodiscard]] Result<DaemonCommand> daemon_command(const ClusterMap& map, Role role, int index,
                                                   const DaemonOptions& options);

// The directory holding psd and workerd: options.bin_dir, else PSRUN_BIN_DIR, else derived from
// /proc/self/exe (<dir>/../psd and <dir>/../workerd in the build tree, else <dir>). Only the
// "which directory" decision; daemon_path() checks the binary exists.
std::string bin_dir_for(const std::string& program, const DaemonOptions& options, const EnvMap& env);

// Full path of `program` ("psd" or "workerd"); kNotFound with the places searched when missing.
[[nodiscard]] Result<std::string> daemon_path(const std::string& program, const DaemonOptions& options,
                                              const EnvMap& env);

// "--model-dir D" or "--model-dir=D" from the training options, if present.
std::optional<std::string> training_model_dir(const std::vector<std::string>& training);

// The value of the last "NAME V" or "NAME=V" of the training options, if any.
std::optional<std::string> training_value(const std::vector<std::string>& training, const std::string& name);

// The last positive "--threads N" or "--threads=N" of the training options (workerd takes the
// last value, so it beats psrun's own --threads for workerd), if any.
std::optional<int> training_threads(const std::vector<std::string>& training);

// Shell-style rendering of argv for logs ("psd --index 0 ...").
std::string render_argv(const std::vector<std::string>& argv);

}  // namespace psrun::launcher
