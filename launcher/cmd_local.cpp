#include "launcher/cmd_local.h"

#include <fmt/format.h>
#include <spdlog/spdlog.h>
#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "common/exit_codes.h"
#include "common/job_keys.h"
#include "common/model_dir_lock.h"
#include "common/option_checks.h"
#include "common/result.h"
#include "launcher/daemon_command.h"
#include "launcher/daemon_restarts.h"
#include "launcher/job_key.h"
#include "launcher/join_file.h"
#include "launcher/launch_options.h"
#include "launcher/map_builder.h"
#include "launcher/ports.h"
#include "launcher/ps_processes.h"
#include "launcher/run_summary.h"
#include "launcher/supervisor.h"
#include "launcher/thread_plan.h"

namespace psrun::launcher {
namespace {

struct LocalOptions {
    int num_ps = 1;
    int num_workers = 1;
    int num_evaluators = 0;
    bool tcp = false;
    double grace_seconds = 10.0;
    int restart_workers = 0;
    int restart_ps = 0;
    std::optional<int> threads;
    bool dry_run = false;
    bool plan = false;
    DaemonOptions daemon;
};

// Removes the private ipc directory on every exit path.
// Prints the chief's final figures from <model-dir>/summary.json (psrun's last word on a run).
void print_summary(const std::optional<std::string>& model_dir) {
    if (!model_dir) return;
    auto lines = read_run_summary(*model_dir);
    if (!lines) {
        spdlog::warn("{}", lines.error().message);
        return;
    }
    spdlog::info("run summary:");
    for (const std::string& line : *lines) spdlog::info("  {}", line);
}

// Says how many threads each daemon gets and warns when the run asks for more compute threads
// than the cores psrun may use.
void log_threads(const ThreadPlan& plan, const LocalOptions& o, const std::vector<std::string>& training, int cores) {
    spdlog::info("{}", describe_thread_plan(plan, cores, o.num_workers, o.num_ps));
    ThreadPlan effective = plan;
    if (const auto t = training_threads(training); t && *t != plan.worker_threads) {
        spdlog::info("--threads {} among the training options: each workerd uses {}", *t, *t);
        effective.worker_threads = *t;
    }
    if (auto warning = local_oversubscription(effective, cores, o.num_workers, o.num_ps)) spdlog::warn("{}", *warning);
}

// The --reconnect-wait psrun local gives psd and the workers with --restart-ps when none is given:
// a psd restarted on this host answers within seconds; a minute covers a loaded host.
constexpr double kRestartPsReconnectWait = 60;

// --restart-ps N needs the ps, a model dir to restore from and workers that wait for the
// restarted psd: throws UsageError naming what to add; gives --reconnect-wait its default.
void check_restart_ps(const LocalOptions& o, DaemonOptions& daemon) {
    if (o.restart_ps == 0) return;
    if (o.num_ps == 0)
        throw UsageError("--restart-ps needs --ps 1 or more (a standalone worker has no psd to restart)");
    if (!training_model_dir(daemon.training))
        throw UsageError(
            "--restart-ps needs --model-dir D in the training options (after --): the chief restores "
            "a restarted psd from the newest checkpoint there (add --checkpoint-secs or "
            "--checkpoint-steps to bound the steps lost)");
    if (daemon.reconnect_wait && *daemon.reconnect_wait <= 0)
        throw UsageError(
            "--restart-ps needs the workers to wait for the restarted psd: drop --reconnect-wait 0 (with "
            "--restart-ps psrun local's default is 60 s) or give --reconnect-wait S > 0");
    if (!daemon.reconnect_wait) daemon.reconnect_wait = kRestartPsReconnectWait;
}

// Names every daemon restart (--restart-workers, --restart-ps) in the log and in <model-dir>/summary.json.
void report_restarts(const DaemonRestarts& restarts, const std::optional<std::string>& model_dir) {
    if (restarts.all().empty()) return;
    for (const DaemonRestart& r : restarts.all())
        spdlog::info("restarted {} at {}: it {} at global step {}", r.label, r.time_utc, r.status,
                     r.global_step ? std::to_string(*r.global_step) : std::string("unknown"));
    if (!model_dir) return;
    if (auto added = restarts.add_to_summary(*model_dir); !added) spdlog::warn("{}", added.error().message);
}

void run_local(const LocalOptions& o, CommandContext& ctx) {
    const int total = o.num_ps + o.num_workers + o.num_evaluators;
    if (o.num_ps == 0 && (o.num_workers != 1 || o.num_evaluators != 0))
        throw UsageError(
            "--ps 0 runs one standalone worker: use --workers 1 and no evaluators, "
            "or --ps 1 or more");
    // A private (0700) directory for the ipc endpoints and, without a model dir, the job key.
    const ps_tools::TempDir dir("psrun-local");
    std::vector<std::string> addresses;
    if (!o.tcp) {
        for (int i = 0; i < total; ++i) {
            const char* kind = i < o.num_ps ? "ps" : i < o.num_ps + o.num_workers ? "worker" : "evaluator";
            const int index = i < o.num_ps                   ? i
                              : i < o.num_ps + o.num_workers ? i - o.num_ps
                                                             : i - o.num_ps - o.num_workers;
            addresses.push_back(fmt::format("ipc://{}/{}-{}", dir.path(), kind, index));
        }
    } else {
        auto ports = free_local_ports(total);
        if (!ports) throw std::runtime_error(ports.error().message);
        for (int p : *ports) addresses.push_back(fmt::format("127.0.0.1:{}", p));
    }
    auto map = local_map(o.num_ps, o.num_workers, o.num_evaluators, addresses);
    if (!map) throw UsageError(map.error().message);
    const ThreadPlan threads = local_thread_plan(o.threads, ctx.affinity_cpus, o.num_workers);
    map->threads = threads.worker_threads;
    if (o.plan) {
        std::cout << map->to_table() << std::flush;
        ctx.exit_code = kExitOk;
        return;
    }
    log_threads(threads, o, ctx.training, ctx.affinity_cpus);
    if (o.num_evaluators > 0 && !training_model_dir(ctx.training))
        throw UsageError(
            "--evaluators needs --model-dir D in the training options (after --): the evaluator "
            "evaluates the checkpoints the chief writes there");
    DaemonOptions daemon = o.daemon;
    daemon.training = ctx.training;
    daemon.ps_threads = threads.ps_threads;
    check_restart_ps(o, daemon);
    if (daemon.min_workers && *daemon.min_workers > o.num_workers)
        throw UsageError(fmt::format("--min-workers {} is more than --workers {}: give at most that many",
                                     *daemon.min_workers, o.num_workers));
    if (daemon.max_workers && *daemon.max_workers < o.num_workers)
        throw UsageError(
            fmt::format("--max-workers {} is below --workers {}: give at least that many (the workers that "
                        "may join come on top)",
                        *daemon.max_workers, o.num_workers));
    if (daemon.max_workers && *daemon.max_workers > o.num_workers && !training_value(daemon.training, "--data-chunks"))
        throw UsageError(
            "--max-workers lets workers join, which read the data chunks psd 0 leases: give --data-chunks "
            "C among the training options (after --)");
    if (daemon.min_workers && !training_value(daemon.training, "--data-chunks"))
        spdlog::warn(
            "--min-workers without --data-chunks C in the training options: a dropped worker's shard is "
            "not read again (give --data-chunks to hand the data out in chunks)");
    // One host: no network between the daemons can blink, and a daemon that is gone is gone (psrun sees it exit),
    // so nobody waits for a silent peer unless asked to (or psrun restarts the psd: --restart-ps).
    if (!daemon.reconnect_wait) daemon.reconnect_wait = 0;
    // One run per model dir: psrun local holds it from here to its exit, its daemons join.
    std::unique_ptr<ModelDirLock> dir_lock;
    if (const auto model_dir = training_model_dir(daemon.training); model_dir && !o.dry_run) {
        daemon.run_id = fmt::format("local-{}-{}", this_host(), ::getpid());
        auto lock = ModelDirLock::acquire(*model_dir, {daemon.run_id, "psrun local"});
        if (!lock) throw UsageError(lock.error().message);
        dir_lock = std::move(*lock);
    }
    if (!daemon.no_auth && daemon.key_file.empty() && o.num_ps > 0 && !o.dry_run) {
        const auto model_dir = training_model_dir(daemon.training);
        auto key =
            prepare_local_job_key(model_dir ? default_job_key_path(*model_dir, "local") : dir.path() + "/job.key");
        if (!key) throw UsageError(key.error().message);
        daemon.key_file = *key;
    }
    std::vector<DaemonCommand> commands;
    for (const TaskSlot& slot : map->slots) {
        auto cmd = daemon_command(*map, slot.role, slot.role_index, daemon);
        if (!cmd) throw UsageError(cmd.error().message);
        if (o.dry_run) {
            std::cout << render_argv(cmd->argv) << '\n';
            continue;
        }
        auto path = daemon_path(cmd->program, daemon, ctx.env);
        if (!path) throw UsageError(path.error().message);
        cmd->path = *path;
        commands.push_back(std::move(*cmd));
    }
    if (o.dry_run) {
        std::cout << std::flush;
        ctx.exit_code = kExitOk;
        return;
    }
    // Room for workers that join (--max-workers): psrun join finds psd through <model-dir>/.psrun/join.json.
    std::optional<std::string> join_file;
    if (const auto model_dir = training_model_dir(daemon.training); model_dir && !commands.empty())
        if (const auto info = join_info_from_psd(commands.front().argv)) {
            if (auto wrote = write_join_info(*model_dir, *info); !wrote)
                throw std::runtime_error(wrote.error().message);
            join_file = join_file_path(*model_dir);
            spdlog::info(
                "room for {} more worker{} (--max-workers {}): psrun join -- <the training options> joins "
                "this run ({})",
                info->max_workers - info->num_workers, info->max_workers - info->num_workers == 1 ? "" : "s",
                info->max_workers, *join_file);
        }
    DaemonRestarts restarts(o.restart_workers, o.restart_ps);
    Supervisor supervisor(seconds_to_ms(o.grace_seconds), &restarts, daemon.min_workers.has_value());
    ctx.exit_code = supervisor.run(commands);
    if (join_file) std::filesystem::remove(*join_file);  // its endpoints are gone
    report_restarts(restarts, training_model_dir(daemon.training));
    if (ctx.exit_code == kExitOk) {
        spdlog::info("all daemons finished");
        if (o.num_ps > 0) print_summary(training_model_dir(daemon.training));
    } else if (ctx.exit_code == kExitPreempted) {
        spdlog::warn(
            "psrun local was stopped and the chief saved a checkpoint (exit code {}): run the same command "
            "again to resume from it",
            ctx.exit_code);
    } else spdlog::error("psrun local failed (exit code {})", ctx.exit_code);
}

}  // namespace

void add_local_command(CLI::App& app, CommandContext& ctx) {
    auto o = std::make_shared<LocalOptions>();
    CLI::App* cmd =
        app.add_subcommand("local",
                           "Run the whole cluster on this host: K psd and W workerd as supervised children "
                           "on ipc endpoints in a private directory (or TCP on 127.0.0.1 with --tcp). Usage: psrun "
                           "local --ps K --workers W [options] [-- training options]");
    cmd->add_option("--ps", o->num_ps, "parameter servers (0 with --workers 1: workerd --standalone)")
        ->check(integer_in(0, max_local_processes()))
        ->capture_default_str();
    cmd->add_option("--workers", o->num_workers, "workers (worker 0 is the chief)")
        ->check(integer_in(1, max_local_processes()))
        ->capture_default_str();
    cmd->add_option("--evaluators", o->num_evaluators, "evaluators")
        ->check(integer_in(0, max_local_processes()))
        ->capture_default_str();
    cmd->add_flag("--tcp", o->tcp,
                  "use TCP on 127.0.0.1 (free ports chosen by the kernel, CURVE-encrypted "
                  "unless --no-auth) instead of the default ipc:// endpoints in a private "
                  "temporary directory (owner-only sockets, removed at exit)");
    cmd->add_option("--grace", o->grace_seconds,
                    "seconds a daemon gets to exit after SIGTERM (and the ps after the last "
                    "worker) before SIGKILL")
        ->check(number_in(0, 3600, "seconds"))
        ->capture_default_str();
    cmd->add_option("--restart-workers", o->restart_workers,
                    "start a worker that dies (killed by a signal, or exit 1) again with its command line, at most "
                    "N times in all; it rejoins the run, which can still end 0 (summary.json lists the restarts)")
        ->check(integer_in(0, 1000000))
        ->capture_default_str();
    cmd->add_option("--restart-ps", o->restart_ps,
                    "start a psd that dies (killed by a signal, or exit 1) again with its command line on the same "
                    "endpoint, at most N times in all; the chief restores it from the newest checkpoint (needs "
                    "--model-dir; --reconnect-wait defaults to 60 s with it)")
        ->check(integer_in(0, 1000000))
        ->capture_default_str();
    cmd->add_option("--threads", o->threads,
                    "oneDNN/OpenMP threads per daemon (default: each workerd gets the cores of psrun's affinity "
                    "mask divided by --workers, at least 1, and psd 1)")
        ->check(thread_count(1));
    cmd->add_flag("--plan", o->plan, "print the local cluster map and exit");
    cmd->add_flag("--dry-run", o->dry_run, "print every daemon command line and exit");
    add_daemon_options(cmd, o->daemon);
    cmd->footer(
        "A failing daemon stops the others (SIGTERM, then SIGKILL after --grace) and psrun "
        "exits 1 naming it; Ctrl-C or SIGTERM stops all daemons the same way. Exit 0 "
        "only when every worker and evaluator exited 0 (an evaluator exits 0 after the last "
        "step's checkpoint, 1 when it gave up waiting).");
    cmd->callback([o, &ctx] { run_local(*o, ctx); });
}

}  // namespace psrun::launcher
