#include "launcher/cmd_join.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iostream>
#include <memory>
#include <stdexcept>

#include "common/model_dir_lock.h"
#include "common/option_checks.h"
#include "common/result.h"
#include "launcher/daemon_command.h"
#include "launcher/join_file.h"
#include "launcher/tf_cluster.h"

namespace psrun::launcher {
namespace {

struct JoinOptions {
    std::string ps;        // --ps EPS: psd endpoints (else the join file)
    std::string key_file;  // with --ps
    bool no_auth = false;
    std::string auth;
    std::string run_id;
    std::string bin_dir;
    std::optional<int> threads;
    std::optional<double> reconnect_wait;
    bool dry_run = false;
};

std::vector<std::string> join_split_endpoints(const std::string& text) {
    std::vector<std::string> out;
    std::size_t start = 0;
    while (start <= text.size()) {
        const std::size_t comma = std::min(text.find(',', start), text.size());
        out.push_back(text.substr(start, comma - start));
        start = comma + 1;
    }
    return out;
}

// The workerd command line of a joiner: psd's endpoints and auth from `info`, then the training options.
std::vector<std::string> join_argv(const JoinInfo& info, const JoinOptions& o, const std::vector<std::string>& training,
                                   std::optional<int> threads) {
    std::vector<std::string> argv = {"workerd", "--join", "--ps", info.ps};
    if (info.no_auth) {
        argv.push_back("--no-auth");
    } else {
        argv.insert(argv.end(), {"--key-file", info.key_file});
        if (!info.auth.empty()) argv.insert(argv.end(), {"--auth", info.auth});
    }
    if (o.reconnect_wait) argv.insert(argv.end(), {"--reconnect-wait", fmt::format("{}", *o.reconnect_wait)});
    if (threads) argv.insert(argv.end(), {"--threads", std::to_string(*threads)});
    if (!info.run_id.empty()) argv.insert(argv.end(), {"--run-id", info.run_id});
    argv.insert(argv.end(), training.begin(), training.end());
    return argv;
}

// The join file outlives its job (psd is exec'd under psrun run; a killed psrun local leaves it):
// a job whose run no longer holds the model dir with a live process is refused at once, instead of
// a HELLO that waits for a psd that is gone.
void check_job_alive(const std::string& model_dir, const std::string& run_id) {
    if (run_id.empty()) return;  // a join file of a run without an id: psd's reply decides
    const ModelDirLockOptions lock_options;
    const RunStatus status = ModelDirLock::status(model_dir, run_id, lock_options);
    if (status.live) return;
    throw UsageError(fmt::format(
        "psrun join: the job that wrote {} (run {}) is over: {}{}. The join file outlives its job; join a "
        "running job (started with --max-workers M on this model dir), or give --ps and --key-file",
        join_file_path(model_dir), run_id, status.description,
        status.holds ? fmt::format(", and none of its processes is alive (one on another host counts as gone after "
                                   "{} s without a heartbeat)",
                                   lock_options.lease.count() / 1000)
                     : ""));
}

void run_join(const JoinOptions& o, CommandContext& ctx) {
    const auto& training = ctx.training;
    const auto chunks = training_value(training, "--data-chunks");
    if (!chunks || *chunks == "0")
        throw UsageError(
            "psrun join needs --data-chunks C among the training options (after --), the run's value: a "
            "joining worker reads the chunks psd 0 leases");
    for (const std::string& a : training)
        if (a == "--chief" || a == "--index" || a.starts_with("--index="))
            throw UsageError("psrun join: " + a +
                             " is not for a joining worker (psd 0 hands out its index; a chief "
                             "never joins): drop it");
    JoinInfo info;
    std::string ps = o.ps;
    std::string source = "--ps";
    const auto tf_config = env_get(ctx.env, "TF_CONFIG");
    if (ps.empty() && tf_config && !tf_config->empty()) {  // the job's ps list, as psrun run reads it
        auto map = map_from_tf_config(*tf_config);
        if (!map) throw UsageError(map.error().message);
        if (map->ps.empty()) throw UsageError("TF_CONFIG: cluster.ps is empty: a joining worker needs the job's psd");
        for (const std::string& address : map->ps) ps += (ps.empty() ? "" : ",") + std::string("tcp://") + address;
        source = "TF_CONFIG";
    } else if (!ps.empty()) {
        for (const std::string& address : join_split_endpoints(ps))
            if (address.find("://") == std::string::npos)
                if (auto ok = check_host_port(address, "--ps"); !ok) throw UsageError(ok.error().message);
    }
    if (!ps.empty()) {
        if (!o.no_auth && o.key_file.empty())
            throw UsageError("psrun join with " + source + " needs --key-file F (the job's key file) or --no-auth");
        info.ps = ps;
        info.key_file = o.key_file;
        info.no_auth = o.no_auth;
        info.auth = o.auth;
        info.run_id = o.run_id;
    } else {
        const auto model_dir = training_model_dir(training);
        if (!model_dir)
            throw UsageError(
                "psrun join: give --ps EPS and --key-file F, or --model-dir D among the training options "
                "(the job's join file is read from D/.psrun/join.json)");
        auto read = read_join_info(*model_dir);
        if (!read) throw UsageError(read.error().message);
        info = *read;
        if (!o.run_id.empty()) info.run_id = o.run_id;
        check_job_alive(*model_dir, info.run_id);
        spdlog::info("join: the job on {} (psd {}, {} workers, room for {})", *model_dir, info.ps, info.num_workers,
                     info.max_workers);
    }
    std::optional<int> threads = o.threads;
    if (!threads)
        if (const auto cpus = env_get(ctx.env, "SLURM_CPUS_PER_TASK"); cpus && !cpus->empty()) {
            if (cpus->size() > 6 || cpus->find_first_not_of("0123456789") != std::string::npos || std::stoi(*cpus) < 1)
                throw UsageError("SLURM_CPUS_PER_TASK='" + *cpus +
                                 "' is not a positive count: fix it, or give --threads");
            threads = std::stoi(*cpus);
        }
    if (!threads && ctx.affinity_cpus > 0) threads = ctx.affinity_cpus;
    const auto argv = join_argv(info, o, training, threads);
    if (o.dry_run) {
        std::cout << render_argv(argv) << std::endl;
        ctx.exit_code = kExitOk;
        return;
    }
    DaemonOptions daemon;
    daemon.bin_dir = o.bin_dir;
    auto path = daemon_path("workerd", daemon, ctx.env);
    if (!path) throw UsageError(path.error().message);
    std::vector<char*> raw;
    for (const std::string& a : argv) raw.push_back(const_cast<char*>(a.c_str()));
    raw.push_back(nullptr);
    spdlog::info("joining worker: exec {}", render_argv(argv));
    ::execv(path->c_str(), raw.data());
    throw std::runtime_error("cannot exec " + *path + ": " + std::strerror(errno));
}

}  // namespace

void add_join_command(CLI::App& app, CommandContext& ctx) {
    auto o = std::make_shared<JoinOptions>();
    CLI::App* cmd = app.add_subcommand(
        "join",
        "Join a running job as one more worker (the job needs room: psrun local/run --max-workers M). Usage: psrun "
        "join [--ps EPS --key-file F | --no-auth] [options] -- training options (the job's, with --data-chunks C; "
        "without --ps, --model-dir D among them finds the job's join file)");
    auto* key = cmd->add_option("--key-file", o->key_file, "with --ps: the job's key file");
    cmd->add_option("--ps,--ps_hosts,--ps-hosts", o->ps,
                    "psd endpoints of the job (HOST:PORT, tcp://HOST:PORT or ipc:///path, comma-separated); default: "
                    "TF_CONFIG's cluster.ps when set, else the join file of --model-dir");
    auto* no_auth =
        cmd->add_flag("--no-auth", o->no_auth, "with --ps: the job runs without authentication")->excludes(key);
    cmd->add_option("--auth", o->auth, "with --ps and --key-file, on tcp: mac or curve, as the job's daemons")
        ->check(CLI::IsMember({"mac", "curve"}))
        ->excludes(no_auth);
    cmd->add_option("--run-id", o->run_id, "the run that holds the model dir (default: the join file's)");
    cmd->add_option("--bin-dir", o->bin_dir, "directory holding workerd (default: PSRUN_BIN_DIR, else next to psrun)");
    cmd->add_option("--threads", o->threads, "oneDNN/OpenMP threads (default: SLURM_CPUS_PER_TASK, else psrun's CPUs)")
        ->check(thread_count(1));
    cmd->add_option("--reconnect-wait", o->reconnect_wait, "seconds to wait for a lost psd to answer again")
        ->check(seconds_at_least(0));
    cmd->add_flag("--dry-run", o->dry_run, "print the workerd command line instead of executing it");
    cmd->callback([o, &ctx] { run_join(*o, ctx); });
}

}  // namespace psrun::launcher
