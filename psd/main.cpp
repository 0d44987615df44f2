// psd: the parameter-server daemon. Thin main: block signals, parse flags, run the server.
#include <malloc.h>

#include <spdlog/spdlog.h>
#include <CLI/CLI.hpp>
#include <iostream>
#include <map>
#include <string>

#include "common/denormals.h"
#include "common/job_keys.h"
#include "common/logging.h"
#include "common/model_dir_lock.h"
#include "common/option_checks.h"
#include "common/pause_detector.h"
#include "common/ps_health.h"
#include "common/result.h"
#include "common/signals.h"
#include "common/zmq_util.h"
#include "psd/parameter_server.h"

int main(int argc, char** argv) {
    psrun::flush_denormals_to_zero();  // before any thread: they inherit it (common/denormals.h)
    psrun::block_termination_signals();
    // 13 MB messages arrive every step: keep them on the heap instead of fresh mmaps (page faults).
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);

    CLI::App app{"psd: psrun parameter-server daemon"};
    psrun::psd::ServerOptions o;
    std::string ps_list, key_file, log_level = "info", run_id, auth{psrun::to_string(o.auth)};
    bool no_auth = false;
    double worker_timeout = 60, init_timeout = 300, signal_grace = 8;
    double reconnect_wait = static_cast<double>(psrun::kDefaultReconnectWait.count());
    app.add_option("--index", o.index, "this psd's position in --ps")
        ->check(psrun::integer_in(0, psrun::kMaxTasks - 1))
        ->required();
    app.add_option("--ps", ps_list, "comma-separated endpoints of every psd")->required();
    app.add_option("--num-workers", o.num_workers, "workers in the cluster map")
        ->check(psrun::integer_in(1, psrun::kMaxTasks))
        ->required();
    app.add_option("--model-dir", o.model_dir,
                   "the run's model dir: held for this run while psd lives (.psrun/run.lock); standby: endpoint "
                   "and shard files go here");
    app.add_option("--run-id", run_id,
                   "the run this psd belongs to, for the model dir lock (psrun passes it; default: derived from --ps)");
    auto* key_opt = app.add_option(
        "--key-file", key_file, "the job's key file: job token, CURVE keys (used on tcp; ipc sockets are owner-only)");
    app.add_flag("--no-auth", no_auth, "no key file: no CURVE, no job token")->excludes(key_opt);
    app.add_option("--auth", auth,
                   "with --key-file, on tcp: mac (a MAC on every message) or curve (encrypt every byte)")
        ->excludes("--no-auth")
        ->capture_default_str();
    app.add_flag("--standby", o.standby, "serve successive runs until stopped; save the shard on exit");
    app.add_option("--worker-timeout", worker_timeout, "seconds of silence before a worker is declared dead")
        ->check(psrun::positive_seconds());
    app.add_option("--reconnect-wait", reconnect_wait,
                   "seconds a worker declared dead may take to speak again (a network that blinked, a stopped "
                   "process) before the run can end without it; 0: end at once")
        ->check(psrun::seconds_at_least(0))
        ->capture_default_str();
    app.add_option("--init-timeout", init_timeout,
                   "seconds PULLs wait for the chief's INIT; a worker without HELLO by then is dead")
        ->check(psrun::positive_seconds());
    auto* sync = app.add_flag("--sync", o.sync, "synchronous training (average gradients per step)");
    app.add_option("--replicas-to-aggregate", o.replicas_to_aggregate, "sync: gradients averaged per step")
        ->check(psrun::integer_in(1, psrun::kMaxTasks))
        ->needs(sync);
    app.add_flag("--async-tables", o.async_tables,
                 "sync: the sparse tables stay asynchronous: each gradient's rows are applied when it arrives "
                 "(not averaged over the step), the dense tensors wait for the step")
        ->needs(sync);
    app.add_option("--backup-workers", o.backup_workers, "sync: extra workers whose late gradients are dropped")
        ->check(psrun::integer_in(0, psrun::kMaxTasks - 1))
        ->needs(sync);
    app.add_option("--straggler-every", o.straggler_every, "sync: steps between straggler reports")
        ->check(psrun::integer_in(1, 1000000000));
    app.add_option("--max-bad-grads", o.max_bad_grads,
                   "rejected non-finite gradients after which psd stops the run (every worker is told; exit 1); "
                   "0: no limit")
        ->check(psrun::integer_in(0, 1000000000000))
        ->capture_default_str();
    app.add_option("--min-workers", o.min_workers,
                   "elastic membership: a worker declared dead is dropped (its data chunks re-queued, sync steps "
                   "aggregate over the rest) and the run ends 0 when at least K workers finished and the chief "
                   "stayed; fewer than K left stops the run (exit 1); default: off (a dead worker fails the run)")
        ->check(psrun::integer_in(1, psrun::kMaxTasks));
    app.add_option("--max-workers", o.max_workers,
                   "elastic membership: room for workers that join the running job (psrun join) up to M in all; "
                   "psd 0 hands out slots --num-workers..M-1 (and those of workers dropped for good); "
                   "default: --num-workers (nobody joins)")
        ->check(psrun::integer_in(1, psrun::kMaxTasks));
    app.add_option("--max-staleness", o.max_staleness,
                   "async: bounded staleness: a worker's reply waits while it has sent more than S gradients more "
                   "than the slowest live worker (0: lock-step); default: no bound")
        ->check(psrun::integer_in(0, 1000000))
        ->excludes(sync);
    app.add_option("--signal-grace", signal_grace,
                   "seconds psd waits after SIGTERM/SIGUSR1 for the chief's checkpoint and every worker's DONE")
        ->check(psrun::positive_seconds())
        ->capture_default_str();
    app.add_option("--threads", o.threads,
                   "threads for the gradient check and the optimizer update (the poll "
                   "loop stays one thread)")
        ->check(psrun::thread_count(1))
        ->capture_default_str();
    using Writer = psrun::psd::ServerOptions::CheckpointWriter;
    const std::map<std::string, Writer> writers{
        {"auto", Writer::kAuto}, {"thread", Writer::kThread}, {"fork", Writer::kFork}, {"loop", Writer::kLoop}};
    auto* writer_option =
        app.add_option("--checkpoint-writer", o.checkpoint_writer,
                       "who writes a checkpoint: thread (a thread of psd, from a copy-on-write snapshot of the sparse "
                       "tables' rows kept by psd), fork (a forked child, from the kernel's copy-on-write snapshot), "
                       "both while psd serves, or loop (psd's poll loop: every worker waits); auto: thread where the "
                       "shard holds sparse tables, else fork")
            ->transform(CLI::CheckedTransformer(writers, CLI::ignore_case))
            ->default_str("auto");
    app.add_option("--checkpoint-full-every", o.checkpoint_full_every,
                   "of every N checkpoints, one holds the sparse tables whole and the others only their rows changed "
                   "since that one (a restore reads both); 1: every checkpoint whole")
        ->check(psrun::integer_in(1, 1000000))
        ->capture_default_str();
    bool checkpoint_in_loop = false;
    app.add_flag("--checkpoint-in-loop", checkpoint_in_loop, "the same as --checkpoint-writer loop")
        ->excludes(writer_option);
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
    if (psrun::wants_numeric_option_list(argc, argv)) {
        psrun::print_numeric_options(app, std::cout);
        return psrun::kExitOk;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? psrun::kExitOk : psrun::kExitUsage;
    }
    psrun::init_logging("psd", static_cast<int>(o.index), log_level);
    try {
        o.endpoints = psrun::split_endpoint_list(ps_list);
        o.worker_timeout = psrun::seconds_to_ms(worker_timeout);
        o.init_timeout = psrun::seconds_to_ms(init_timeout);
        o.reconnect_wait = psrun::seconds_to_ms(reconnect_wait);
        o.signal_grace = psrun::seconds_to_ms(signal_grace);
        if (checkpoint_in_loop) o.checkpoint_writer = Writer::kLoop;
        if (o.sync && o.backup_workers >= o.num_workers)
            throw psrun::UsageError("--backup-workers " + std::to_string(o.backup_workers) + " leaves no worker of " +
                                    std::to_string(o.num_workers) + " (--num-workers) to aggregate: give fewer");
        if (o.min_workers > o.num_workers)
            throw psrun::UsageError("--min-workers " + std::to_string(o.min_workers) + " is more than --num-workers " +
                                    std::to_string(o.num_workers) + ": give at most that many");
        if (o.max_workers != 0 && o.max_workers < o.num_workers)
            throw psrun::UsageError("--max-workers " + std::to_string(o.max_workers) + " is below --num-workers " +
                                    std::to_string(o.num_workers) + ": give at least that many");
        if (o.sync && o.replicas_to_aggregate == 0) o.replicas_to_aggregate = o.num_workers - o.backup_workers;
        if (!no_auth) {
            if (key_file.empty()) throw psrun::UsageError("give --key-file F (the job's key file) or --no-auth");
            auto keys = psrun::read_job_key_file(key_file);
            if (!keys) throw psrun::UsageError(keys.error().message);
            o.keys = *keys;
        }
        auto mode = psrun::parse_auth_mode(auth);
        if (!mode) throw psrun::UsageError(mode.error().message);
        o.auth = *mode;
        std::unique_ptr<psrun::ModelDirLock> dir_lock;  // held until psd exits
        if (!o.model_dir.empty()) {
            auto lock = psrun::ModelDirLock::acquire(
                o.model_dir,
                {run_id.empty() ? psrun::run_id_from_endpoints(ps_list) : run_id, "psd " + std::to_string(o.index)});
            if (!lock) throw psrun::UsageError(lock.error().message);
            dir_lock = std::move(*lock);
        }
        psrun::PauseDetector::process();  // start watching for stops of this process (issue 14)
        psrun::psd::ParameterServer server(o);
        return server.run();
    } catch (const psrun::UsageError& e) {
        spdlog::error("{}", e.what());
        return psrun::kExitUsage;
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return psrun::kExitFailure;
    }
}
