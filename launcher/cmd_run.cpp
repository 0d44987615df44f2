#include "launcher/cmd_run.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "common/result.h"
#include "launcher/daemon_command.h"
#include "launcher/env_map.h"
#include "launcher/job_key.h"
#include "launcher/join_file.h"
#include "launcher/launch_options.h"
#include "launcher/map_builder.h"
#include "launcher/ports.h"
#include "launcher/thread_plan.h"

namespace psrun::launcher {
namespace {

struct RunOptions {
    MapOptions map;
    DaemonOptions daemon;
    bool dry_run = false;
};

[[noreturn]] void exec_daemon(const DaemonCommand& cmd) {
    std::vector<char*> argv;
    for (const std::string& a : cmd.argv) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    spdlog::info("{}: exec {}", cmd.label, render_argv(cmd.argv));
    ::execv(cmd.path.c_str(), argv.data());
    throw std::runtime_error("cannot exec " + cmd.path + ": " + std::strerror(errno));
}

// A requeued Slurm job runs again with SLURM_RESTART_COUNT=N (N >= 1). The daemons need no
// flag for it: the chief restores the newest checkpoint in --model-dir whenever psd is empty.
void log_restart_count(const EnvMap& env) {
    const auto count = env_get(env, "SLURM_RESTART_COUNT");
    if (!count || count->empty()) return;
    if (*count == "0") {
        spdlog::info("SLURM_RESTART_COUNT=0");
        return;
    }
    spdlog::warn(
        "SLURM_RESTART_COUNT={}: this job was requeued; the chief resumes from the newest checkpoint in "
        "--model-dir",
        *count);
}

// A ps binds its endpoint; fail now rather than let psd retry on a taken port.
void check_ps_port(const ClusterMap& map) {
    const std::string& address = map.ps[static_cast<size_t>(map.self->index)];
    if (address.find("://") != std::string::npos) return;
    const size_t colon = address.rfind(':');
    auto ok = check_port_free(address.substr(0, colon), std::stoi(address.substr(colon + 1)));
    if (!ok) throw std::runtime_error(ok.error().message);
}

void run(const RunOptions& o, CommandContext& ctx) {
    auto map = resolve_map(o.map, ctx.env, ctx.affinity_cpus);
    if (!map) throw UsageError(map.error().message);
    if (auto warning = task_oversubscription(map->threads, ctx.affinity_cpus)) spdlog::warn("{}", *warning);
    log_restart_count(ctx.env);
    DaemonOptions daemon = o.daemon;
    daemon.training = ctx.training;
    // Every task of the job (every step of a Slurm job, a requeued job too) is one run of its model dir.
    if (training_model_dir(daemon.training)) {
        const auto slurm_job = ctx.env.find("SLURM_JOB_ID");
        daemon.run_id = slurm_job != ctx.env.end() && !slurm_job->second.empty() ? "slurm-" + slurm_job->second
                                                                                 : job_name_for(*map, ctx.env);
    }
    if (!o.dry_run) {
        // Cheap checks first: a missing binary or a taken port must not wait for the key.
        auto probe = daemon_command(*map, map->self->role, map->self->index, daemon);
        if (!probe) throw UsageError(probe.error().message);
        auto path = daemon_path(probe->program, daemon, ctx.env);
        if (!path) throw UsageError(path.error().message);
        if (map->self->role == Role::kPs) check_ps_port(*map);
        auto key = prepare_job_key(daemon, *map, ctx.env, std::chrono::seconds(120));
        if (!key) throw UsageError(key.error().message);
        daemon.key_file = *key;
    }
    auto cmd = daemon_command(*map, map->self->role, map->self->index, daemon);
    if (!cmd) throw UsageError(cmd.error().message);
    if (o.dry_run) {
        std::cout << render_argv(cmd->argv) << std::endl;
        ctx.exit_code = kExitOk;
        return;
    }
    cmd->path = *daemon_path(cmd->program, daemon, ctx.env);
    // ps 0 of a job with room for joiners (--max-workers) tells psrun join where psd is: the file is on the
    // shared model dir, so a joiner in another step (srun --overlap) or allocation finds it.
    if (map->self->role == Role::kPs && map->self->index == 0)
        if (const auto model_dir = training_model_dir(daemon.training))
            if (const auto info = join_info_from_psd(cmd->argv)) {
                if (auto wrote = write_join_info(*model_dir, *info); !wrote) spdlog::warn("{}", wrote.error().message);
                else
                    spdlog::info(
                        "room for {} more worker{} (--max-workers {}): psrun join -- <the training options> "
                        "joins this run, e.g. from srun --overlap --jobid <this job> ({})",
                        info->max_workers - info->num_workers, info->max_workers - info->num_workers == 1 ? "" : "s",
                        info->max_workers, join_file_path(*model_dir));
            }
    exec_daemon(*cmd);
}

}  // namespace

void add_run_command(CLI::App& app, CommandContext& ctx) {
    auto options = std::make_shared<RunOptions>();
    CLI::App* cmd = app.add_subcommand("run",
                                       "Resolve this task's role and exec psd or workerd with explicit flags. Usage: "
                                       "psrun run [options] [-- training options]");
    add_map_options(cmd, options->map, false);
    add_daemon_options(cmd, options->daemon);
    cmd->add_flag("--dry-run", options->dry_run, "print the daemon command line instead of executing it");
    cmd->footer(
        "Training options after \"--\" go to workerd (e.g. -- --data-dir D --steps 2000); "
        "--model-dir among them also goes to psd.\n"
        "ps:     psd --index I --ps EP,... --num-workers W [--model-dir D] [--key-file F | "
        "--no-auth] [--standby] [--worker-timeout S] [--sync --replicas-to-aggregate N "
        "[--backup-workers B]] [--threads T] [--log-level L]\n"
        "worker: workerd --index I --ps EP,... --num-workers W [--chief | --evaluator] "
        "[--key-file F | --no-auth] [--threads T] [training options]\n"
        "A map without ps and with one worker runs: workerd --standalone [--threads T] "
        "[training options]");
    cmd->callback([options, &ctx] { run(*options, ctx); });
}

}  // namespace psrun::launcher
