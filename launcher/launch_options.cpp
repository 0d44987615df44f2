#include "launcher/launch_options.h"

#include <spdlog/spdlog.h>

#include "common/message_auth.h"
#include "common/option_checks.h"

namespace psrun::launcher {

void add_map_options(CLI::App* cmd, MapOptions& o, bool preview) {
    const char* src = "Sources (first match wins)";
    cmd->add_option("--ps_hosts,--ps-hosts", o.tf.ps_hosts, "TF-style: comma-separated ps host:port list")->group(src);
    cmd->add_option("--worker_hosts,--worker-hosts", o.tf.worker_hosts,
                    "TF-style: comma-separated worker host:port list (worker 0 is the chief)")
        ->group(src);
    cmd->add_option("--job_name,--job-name", o.tf.job_name, "TF-style: ps or worker")->group(src);
    cmd->add_option("--task_index,--task-index", o.tf.task_index, "TF-style: index of this task in its job's host list")
        ->check(integer_in(0, kMaxTasks - 1))
        ->group(src);

    const char* roles = "Roles in a Slurm step";
    auto* tasks = cmd->add_option("--tasks", o.tasks,
                                  "one role per task, node-major (slot k = k-th task when the "
                                  "step's tasks are listed node by node, local id within a "
                                  "node): ps, worker, chief, evaluator; e.g. "
                                  "ps,worker,worker,worker,ps,worker,worker,worker")
                      ->group(roles);
    auto* ps = cmd->add_option("--ps", o.num_ps,
                               "number of parameter servers (default 1; 0 for a one-task step, "
                               "which runs workerd --standalone)")
                   ->check(integer_in(0, kMaxTasks))
                   ->group(roles);
    auto* placement = cmd->add_option("--placement", o.placement,
                                      "where --ps puts the ps: spread = one per node first "
                                      "(local id 0 of each node, then local id 1, ...), pack = "
                                      "the first K slots")
                          ->check(CLI::IsMember({"spread", "pack"}))
                          ->capture_default_str()
                          ->group(roles);
    tasks->excludes(ps)->excludes(placement);

    const char* net = "Addresses and ports";
    cmd->add_option("--interface", o.address.interface,
                    "use the IPv4 address of this interface (e.g. ib0) instead of node names")
        ->group(net);
    cmd->add_option("--node-addrs", o.address.node_addrs,
                    "with --interface on several nodes: node=address list of every node "
                    "(as printed by `psrun addr --interface NAME`)")
        ->group(net);
    cmd->add_flag("--no-ib", o.address.no_ib, "keep node names (Ethernet) even with --interface")->group(net);
    cmd->add_option("--port-base", o.port_base,
                    "first port of the derived port range when SLURM_STEP_RESV_PORTS is unset: "
                    "port = base + 32*((job_id*4 + step_id%4) % blocks) + local_id")
        ->check(integer_in(1, 65535))
        ->capture_default_str()
        ->group(net);
    cmd->add_option("--threads", o.threads, "oneDNN/OpenMP threads per daemon (default: SLURM_CPUS_PER_TASK when set)")
        ->check(thread_count(1));

    if (!preview) return;
    const char* pre = "Preview outside Slurm (block distribution)";
    auto* nodelist =
        cmd->add_option("--nodelist", o.preview_nodelist, "preview a step on these nodes, e.g. 'n[1-2]'")->group(pre);
    cmd->add_option("--tasks-per-node", o.preview_tasks_per_node,
                    "tasks per node of the preview, e.g. '4(x2)' or '2,1'")
        ->needs(nodelist)
        ->group(pre);
    cmd->add_option("--procid", o.preview_procid, "rank whose view is shown (default 0)")
        ->check(integer_in(0, 1000000))
        ->needs(nodelist)
        ->group(pre);
    cmd->add_option("--job-id", o.preview_job_id, "job id of the preview (ports; default 0)")
        ->check(integer_in(0, 4294967295))
        ->needs(nodelist)
        ->group(pre);
    cmd->add_option("--step-id", o.preview_step_id, "step id of the preview (ports; default 0)")
        ->check(integer_in(0, 4294967295))
        ->needs(nodelist)
        ->group(pre);
}

void add_daemon_options(CLI::App* cmd, DaemonOptions& o) {
    const char* grp = "Daemon options";
    cmd->add_option("--bin-dir", o.bin_dir,
                    "directory holding psd and workerd (default: PSRUN_BIN_DIR, else next to psrun)")
        ->group(grp);
    auto* key = cmd->add_option("--key-file", o.key_file, "job key file for psd and workerd")->group(grp);
    auto* no_auth =
        cmd->add_flag("--no-auth", o.no_auth, "run psd and workerd without authentication")->excludes(key)->group(grp);
    cmd->add_option(
           "--auth", o.auth,
           std::string("tcp connections: mac (a MAC on every message) or curve (encrypt every byte); default ") +
               std::string(to_string(kDefaultAuthMode)))
        ->check(CLI::IsMember({"mac", "curve"}))
        ->excludes(no_auth)
        ->group(grp);
    auto* sync = cmd->add_flag("--sync", o.sync, "psd: synchronous training")->group(grp);
    cmd->add_option("--replicas-to-aggregate", o.replicas_to_aggregate,
                    "psd with --sync: gradients per step (default: number of workers)")
        ->needs(sync)
        ->check(integer_in(1, kMaxTasks))
        ->group(grp);
    cmd->add_flag("--async-tables", o.async_tables,
                  "psd with --sync: the sparse tables stay asynchronous (each gradient's rows applied when it "
                  "arrives), the dense tensors wait for the step")
        ->needs(sync)
        ->group(grp);
    cmd->add_option("--backup-workers", o.backup_workers, "psd with --sync: backup workers")
        ->needs(sync)
        ->check(integer_in(0, kMaxTasks - 1))
        ->group(grp);
    cmd->add_option("--max-staleness", o.max_staleness,
                    "psd, async: bounded staleness: a worker waits while it has sent more than S gradients more than "
                    "the slowest live worker (0: lock-step); default: no bound")
        ->excludes(sync)
        ->check(integer_in(0, 1000000))
        ->group(grp);
    cmd->add_option("--checkpoint-writer", o.checkpoint_writer,
                    "psd: who writes a checkpoint while psd serves: thread (a thread of psd, from a snapshot of the "
                    "sparse tables' rows), fork (a forked child), or loop (psd itself: the workers wait); default "
                    "auto: the thread where the shards hold sparse tables, else the fork")
        ->check(CLI::IsMember({"auto", "thread", "fork", "loop"}))
        ->group(grp);
    cmd->add_option("--checkpoint-full-every", o.checkpoint_full_every,
                    "psd: of every N checkpoints, one holds the sparse tables whole and the others only the rows "
                    "changed since that one (restored together); 1: every checkpoint whole; default 5")
        ->check(integer_in(1, 1000000))
        ->group(grp);
    cmd->add_flag("--standby", o.standby, "psd: start as a standby")->group(grp);
    cmd->add_option("--worker-timeout", o.worker_timeout,
                    "psd: seconds without a message before a worker counts as lost")
        ->check(positive_seconds())
        ->group(grp);
    cmd->add_option("--max-bad-grads", o.max_bad_grads,
                    "psd: rejected non-finite gradients before the run is stopped (0: no limit; default 100)")
        ->check(integer_in(0, 1000000000000))
        ->group(grp);
    cmd->add_option("--min-workers", o.min_workers,
                    "psd: elastic membership: a worker lost for good (declared dead after --worker-timeout) is "
                    "dropped, its data chunks re-queued (workerd --data-chunks), and the run ends 0 when at least K "
                    "workers finished; the chief stays required; default: off (a dead worker fails the run)")
        ->check(integer_in(1, kMaxTasks))
        ->group(grp);
    cmd->add_option("--max-workers", o.max_workers,
                    "psd: room for workers that join the running job (psrun join) up to M workers in all (at least "
                    "the map's); joiners need --data-chunks; default: nobody joins")
        ->check(integer_in(1, kMaxTasks))
        ->group(grp);
    cmd->add_option("--reconnect-wait", o.reconnect_wait,
                    "psd and workerd: seconds a peer that went silent may take to come back (a network that "
                    "blinked): workers wait this long for a lost psd (the same psd goes on, a restarted one is "
                    "restored from the newest checkpoint), psd this long for a worker it declared dead; 0: fail "
                    "fast (default 180; psrun local: 0)")
        ->check(seconds_at_least(0))
        ->group(grp);
    cmd->add_option("--ps-restart-wait", o.reconnect_wait, "old name of --reconnect-wait")
        ->check(hidden_option_check("--ps-restart-wait", seconds_at_least(0)))
        ->group("")
        ->each([](const std::string&) {
            spdlog::warn(
                "--ps-restart-wait is the old name of --reconnect-wait: use that (it now also sets how long "
                "psd waits for a silent worker)");
        });
    cmd->add_option("--log-level", o.log_level, "psd: trace, debug, info, warn, error")
        ->check(CLI::IsMember({"trace", "debug", "info", "warn", "error"}))
        ->group(grp);
}

}  // namespace psrun::launcher
