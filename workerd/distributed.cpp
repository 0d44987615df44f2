#include "workerd/distributed.h"

#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <csignal>
#include <filesystem>
#include <memory>
#include <optional>
#include <stdexcept>

#include "common/clock.h"
#include "common/exit_codes.h"
#include "common/job_keys.h"
#include "common/model_dir_lock.h"
#include "common/option_checks.h"
#include "common/ps_client.h"
#include "common/shared_dir_check.h"
#include "common/zmq_util.h"
#include "workerd/barrier.h"
#include "workerd/class_names.h"
#include "workerd/data/chunk_source.h"
#include "workerd/data/data_time.h"
#include "workerd/datasets.h"
#include "workerd/hooks.h"
#include "workerd/job_join.h"
#include "workerd/model_identity.h"
#include "workerd/preemption.h"
#include "workerd/ps_figures.h"
#include "workerd/run_recipe.h"
#include "workerd/signal_watcher.h"
#include "workerd/step_loop.h"
#include "workerd/worker_reports.h"

namespace psrun::worker {

void add_cluster_options(CLI::App& app, ClusterOptions& o) {
    app.add_option("--ps", o.ps, "comma-separated psd endpoints (tcp://HOST:PORT, HOST:PORT or ipc:///path)");
    app.add_option("--num-workers", o.num_workers, "workers in the job (the start barrier waits for all)")
        ->check(integer_in(1, kMaxTasks));
    app.add_flag("--chief", o.chief, "this worker initialises the parameters and does the chief's duties");
    app.add_flag("--evaluator", o.evaluator,
                 "evaluate each new checkpoint in --model-dir on the test set (no training)");
    auto* key = app.add_option("--key-file", o.key_file, "the job's key file (job token and CURVE keys)");
    auto* no_auth = app.add_flag("--no-auth", o.no_auth, "no key file: no CURVE, job token 0")->excludes(key);
    app.add_option("--auth", o.auth,
                   "with --key-file, on tcp: mac (a MAC on every message) or curve (encrypt every byte)")
        ->excludes(no_auth)
        ->capture_default_str();
    app.add_option("--connect-timeout", o.connect_timeout, "seconds to wait for psd's reply to HELLO and STATS")
        ->check(positive_seconds())
        ->capture_default_str();
    app.add_option("--step-timeout", o.step_timeout, "seconds to wait for one PUSH_PULL (or DONE) reply")
        ->check(positive_seconds())
        ->capture_default_str();
    app.add_option("--barrier-timeout", o.barrier_timeout, "seconds to wait at the start barrier")
        ->check(positive_seconds())
        ->capture_default_str();
    app.add_option("--signal-grace", o.signal_grace,
                   "seconds after SIGTERM/SIGUSR1 for the preemption checkpoint before a forced exit 1")
        ->check(positive_seconds())
        ->capture_default_str();
    app.add_option("--data-chunks", o.data_chunks,
                   "elastic data: read the chunks psd 0 leases (C per epoch, each example once per epoch whatever "
                   "the membership does) instead of the fixed --shard; in-memory data; 0: the shard")
        ->check(integer_in(0, 1 << 20))
        ->capture_default_str();
    app.add_flag("--join", o.join,
                 "join a running job (psrun join): psd 0 hands out the index (no --index); needs --data-chunks; "
                 "psd must have room (--max-workers)");
    add_fault_options(app, o.faults);
}

DistributedWorker::DistributedWorker(ClusterOptions cluster, TrainOptions training)
    : cluster_(std::move(cluster)), training_(std::move(training)) {}

int DistributedWorker::run() {
    auto& c = cluster_;  // --join: index and num_workers come from psd 0's JOIN reply
    if (c.evaluator) throw UsageError("--evaluator runs workerd/evaluator.h's Evaluator, not a training worker");
    const auto endpoints = split_endpoint_list(c.ps);
    if (endpoints.empty()) throw UsageError("give --ps EP0,EP1,... (or --standalone to train without psd)");
    if (c.join) {
        check_join_options(c);  // workerd/job_join.h
    } else {
        if (c.num_workers == 0) throw UsageError("give --num-workers W (W >= 1)");
        if (c.index >= c.num_workers)
            throw UsageError(fmt::format("--index {} must be below --num-workers {}", c.index, c.num_workers));
    }
    if (training_.steps < 1) throw UsageError("--steps must be >= 1 with psd (it is the last global step)");
    if (!c.no_auth && c.key_file.empty()) throw UsageError("give --key-file F (the job's key file) or --no-auth");
    TrainerConfig config = make_trainer_config(training_);
    if (config.sparse_tables.empty()) {
        config.sparse_tables = SparseTables::automatic(*config.model, kAutoSparseFloats, config.seed);
        for (const auto& table : config.sparse_tables)
            spdlog::info(
                "embedding {}'s table is over {} MiB: it lives on psd as a sparse table (as --sparse-embedding {})",
                table, kAutoSparseFloats * 4 >> 20, table);
    }
    std::optional<JobKeys> keys;
    if (!c.no_auth) {
        auto read = read_job_key_file(c.key_file);
        if (!read) throw UsageError(read.error().message);
        keys = *read;
    }
    const auto auth = parse_auth_mode(c.auth);
    if (!auth) throw UsageError(auth.error().message);
    set_compute_threads(training_.threads);
    SignalWatcher watcher(std::chrono::milliseconds(3000), to_milliseconds(c.signal_grace));

    auto data = load_datasets(training_, model_input(*config.model));
    if (!data) {
        spdlog::error("{}", data.error().message);
        return data_error_exit_code(data.error());
    }
    PsClientOptions po;
    po.endpoints = endpoints;
    po.index = c.index;
    po.role = c.chief ? wire::Role::kChief : wire::Role::kWorker;
    po.keys = keys;
    po.auth = *auth;
    po.connect_timeout = to_milliseconds(c.connect_timeout);
    po.reply_timeout = to_milliseconds(c.step_timeout);
    po.heartbeat_timeout = to_milliseconds(c.faults.heartbeat_timeout);
    po.reconnect_wait = to_milliseconds(c.faults.reconnect_wait);
    po.interrupted = [&watcher] { return watcher.stop_requested(); };
    if (c.faults.deprecated_restart_wait)
        spdlog::warn(
            "--ps-restart-wait is the old name of --reconnect-wait: use that (same meaning, and it also waits "
            "for a psd whose network blinked)");
    po.tensors = SparseTables(*config.model, config.sparse_tables, config.seed, config.raw_ids).wire_tensors();
    po.model = model_id(*config.model);
    po.shared_memory = training_.shared_memory == "on";
    po.shm_regions = training_.overlap == "on" ? 2 : 1;
    po.wire_bf16 = training_.wire_precision == "bf16";
    if (c.join) {  // ask psd 0 for a slot (JOIN), then say HELLO there like any worker
        if (auto joined = take_join_slot(c, po); !joined) {
            spdlog::error("cannot join the job: {} (--ps {})", joined.error().message, c.ps);
            return joined.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
        }
    }
    std::unique_ptr<PsClient> client_ptr;
    try {
        client_ptr = std::make_unique<PsClient>(po);
    } catch (const std::exception& e) {
        throw UsageError(fmt::format("--ps {}: {}", c.ps, e.what()));
    }
    auto fail = [&](const std::string& what, const Error& e) {
        spdlog::error("{}: {} (--ps {})", what, e.message, c.ps);
        return kExitFailure;
    };
    std::optional<SignalWatcher::Blocked> blocked(std::in_place, watcher);  // until training starts
    if (auto hello = client_ptr->hello(); !hello) {
        fail("cannot join the job", hello.error());
        return hello.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
    }
    if (po.wire_bf16)  // shared-memory shards stay f32: say how many shards the option reaches
        spdlog::info("wire precision bf16: {} of {} psd shards exchange bf16 payload frames (shared memory stays f32)",
                     endpoints.size() - client_ptr->shm_shards(), endpoints.size());

    ChunkSource* chunk_source = nullptr;  // owned by the trainer
    std::unique_ptr<BatchSource> train;
    if (c.data_chunks > 0) {  // elastic data: psd 0 leases the chunks (workerd/data/chunk_source.h)
        if (data->train_stream || data->train_mapped)
            throw UsageError(
                "--data-chunks reads the training split from memory: not with a streamed or "
                "memory-mapped split (drop --stream, or --data-chunks)");
        if (training_.augment != "none")
            throw UsageError(
                "--data-chunks does not combine with --augment yet (augmented batches are drawn on "
                "a thread of their own): drop one of them");
        if (c.data_chunks > data->train.size())
            throw UsageError(fmt::format("--data-chunks {} is more than the {} training examples: give at most that",
                                         c.data_chunks, data->train.size()));
        auto source = std::make_unique<ChunkSource>(
            data->train, static_cast<std::size_t>(config.network.batch_size), config.seed, c.data_chunks,
            [&client_ptr](const wire::ChunkRequest& r) { return client_ptr->chunk(r); });
        chunk_source = source.get();
        train = std::move(source);
    } else {
        train = make_train_source(*data, config);
    }
    train->start();  // a stream fills its shuffle buffer while the network is built
    Trainer trainer(config, std::move(train), make_test_source(*data));
    if (c.chief && !training_.model_dir.empty() && !data_record(training_, *data).empty())
        if (auto wrote = write_data_record(training_.model_dir, data_record(training_, *data)); !wrote)
            spdlog::warn("{}", wrote.error().message);
    if (c.chief && !training_.model_dir.empty())  // the recipe this run uses, for --recipe (workerd/run_recipe.h)
        if (auto wrote = write_run_recipe(training_.model_dir, effective_recipe(training_, config)); !wrote)
            spdlog::warn("no {}: {}", kRunRecipeFile, wrote.error().message);
    std::unique_ptr<Checkpointer> checkpointer;  // the chief's, when it has a model dir
    BarrierOptions bo{static_cast<std::uint32_t>(endpoints.size()),
                      c.num_workers,
                      to_milliseconds(c.barrier_timeout),
                      std::chrono::milliseconds(100),
                      &watcher,
                      &po};  // a psd restarted meanwhile: a fresh client
    StepInfo info;
    if (c.chief) {
        if (!training_.model_dir.empty()) {  // before any step: a node-local model dir stops the job here
            if (auto shared = verify_shared_model_dir(*client_ptr, training_.model_dir); !shared) {
                spdlog::error("{}", shared.error().message);
                return shared.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
            }
        }
        if (auto all = wait_for_all_workers(client_ptr, bo); !all) return fail("start barrier", all.error());
        if (!training_.model_dir.empty()) clear_worker_reports(training_.model_dir, c.num_workers);  // no one ended yet
        const wire::InitConfig init{config.optimizer, 0, static_cast<std::uint64_t>(training_.steps)};
        std::optional<RestoredInfo> restored;
        if (!training_.model_dir.empty()) {
            checkpointer = std::make_unique<Checkpointer>(
                CheckpointerOptions{std::filesystem::absolute(training_.model_dir).string(), training_.keep_checkpoints,
                                    training_.checkpoint_secs, static_cast<std::uint64_t>(training_.checkpoint_steps),
                                    init, model_record(*config.model)});
            if (!client_ptr->servers_initialized()) {
                auto r = checkpointer->restore(*client_ptr);
                if (!r) {
                    fail("restore from " + training_.model_dir, r.error());
                    return r.error().code == ErrorCode::kInvalidArgument ? kExitUsage : kExitFailure;
                }
                restored = *r;
            }
        }
        if (restored) {
            spdlog::info("restored global step {} from {}", restored->step, restored->dir);
            auto pulled = client_ptr->pull(trainer.params().all());
            if (!pulled) return fail("PULL", pulled.error());
            info = *pulled;
        } else if (client_ptr->servers_initialized()) {
            spdlog::info("psd already holds parameters: continuing from them");
            if (auto r = client_ptr->init_restored(init); !r) return fail("INIT", r.error());
            auto pulled = client_ptr->pull(trainer.params().all());
            if (!pulled) return fail("PULL", pulled.error());
            info = *pulled;
        } else {
            if (auto r = client_ptr->init(init, trainer.params().all()); !r) return fail("INIT", r.error());
        }
    } else {
        if (!client_ptr->servers_initialized()) {
            if (auto ready = wait_for_init(client_ptr, bo); !ready) return fail("start barrier", ready.error());
        }
        auto pulled = client_ptr->pull(trainer.params().all());
        if (!pulled) return fail("PULL", pulled.error());
        info = *pulled;
    }
    const std::string reads = chunk_source ? fmt::format("data chunks leased by psd 0 ({} per epoch)", c.data_chunks)
                                           : "shard " + training_.shard;
    spdlog::info(
        "worker {}{} of {}: training from global step {} to {} on {}, batch {} ({} ps shard{}), model {}", c.index,
        c.chief ? " (chief)" : "",
        c.join ? fmt::format("a job that started with {} (joined)", c.num_workers) : std::to_string(c.num_workers),
        info.step, training_.steps, reads,
        training_.accumulate_steps > 1
            ? fmt::format("{} ({} micro-batches of {} per update)", examples_per_update(training_),
                          training_.accumulate_steps, training_.batch_size)
            : std::to_string(training_.batch_size),
        endpoints.size(), endpoints.size() == 1 ? "" : "s", describe_model(*config.model));

    blocked.reset();
    std::unique_ptr<MetricsLog> metrics;
    std::unique_ptr<EventWriter> events;
    if (c.chief && !training_.model_dir.empty()) {
        std::filesystem::create_directories(training_.model_dir);
        metrics = std::make_unique<MetricsLog>(training_.model_dir + "/metrics.jsonl");
        events = std::make_unique<EventWriter>(training_.model_dir, this_host());
    }
    RunContext ctx;
    ctx.options = &training_;
    ctx.trainer = &trainer;
    ctx.client = client_ptr.get();
    ctx.metrics = metrics.get();
    ctx.events = events.get();
    ctx.checkpointer = checkpointer.get();
    ctx.index = c.index;
    ctx.num_workers = c.num_workers;
    ctx.chief = c.chief;
    ctx.start_step = info.step;
    ctx.last_step = static_cast<std::uint64_t>(training_.steps);
    ctx.start = Clock::now();
    ctx.stop = info.finished || info.step >= ctx.last_step;
    ctx.interrupted = [&watcher] { return watcher.stop_requested(); };
    resume_data_position(ctx, info.step, client_ptr->sync());
    HookList hooks = make_hooks(ctx);
    if (c.faults.inject_nan_every > 0) hooks.add(make_nan_injector(c.faults.inject_nan_every));
    hooks.begin(ctx);
    bool overlap = training_.overlap == "on" && !client_ptr->sync();
    if (overlap && chunk_source) {  // CHUNK requests go out on the training thread: one thread drives the client
        spdlog::warn("--overlap on: not with --data-chunks (chunks are leased on the training thread); steps block");
        overlap = false;
    }
    if (overlap && trainer.sparse()) {  // the rows of a batch are pulled on the training thread
        spdlog::warn("--overlap on: not with a sparse table (its rows are pulled before each step); steps block");
        overlap = false;
    }
    trainer.set_row_client([&ctx] { return ctx.client; });
    bind_gradient_memory(trainer, *client_ptr, overlap);
    StepLoop loop(
        StepLoopEnv{&watcher, &hooks, &ctx, &client_ptr, &po, &bo, checkpointer.get(), c.faults.reconnect_wait, c.ps,
                    [chunk_source] {  // psd 0's dispenser was restored with the shards
                        if (chunk_source) chunk_source->restart();
                    }},
        info.step, StepResult{info.step, 0, 0.0f, info.finished});
    if (const int failed = loop.run(overlap); failed != kExitOk) return failed;
    const std::uint64_t tag = loop.tag();
    const StepResult& last = loop.last();
    ctx.train_seconds = ctx.elapsed();
    int code = kExitOk;
    if (!c.chief && !training_.model_dir.empty())  // before DONE: the chief sums it (workerd/worker_reports.h)
        if (auto wrote = write_worker_report(training_.model_dir, ctx); !wrote)
            spdlog::warn("{}", wrote.error().message);
    if (chunk_source) chunk_source->report_finished();  // before DONE, which returns unreported chunks
    if (c.chief && !training_.model_dir.empty() && !ctx.stopped_by_signal)  // while every psd answers
        ctx.ps_figures = read_ps_figures(*client_ptr, static_cast<std::uint32_t>(endpoints.size()));
    // A sparse table's rows come from psd: the final evaluation and summary run before DONE lets it go.
    const bool end_before_done = trainer.sparse() && !ctx.stopped_by_signal;
    if (end_before_done) hooks.end(ctx, last);
    if (ctx.stopped_by_signal) {
        code = finish_preempted(ctx, *ctx.client, watcher, tag);
    } else {
        blocked.emplace(watcher);
        if (auto done = ctx.client->done(); !done) code = fail("DONE", done.error());
    }
    if (!c.chief) {
        const double n = std::max<double>(1.0, double(ctx.local_steps));
        spdlog::info(
            "done: {} steps by this worker in {:.1f} s ({:.0f} img/s), global step {}; per step: compute "
            "{:.1f} ms, push_pull {:.1f} ms{}, parameter copy {:.1f} ms",
            ctx.local_steps, ctx.train_seconds,
            ctx.train_seconds > 0 ? double(ctx.local_steps) * double(examples_per_update(training_)) / ctx.train_seconds
                                  : 0.0,
            last.global_step, 1000 * ctx.compute_seconds / n, 1000 * ctx.exchange_seconds / n,
            overlap ? " waited (overlapped)" : "", 1000 * ctx.copy_seconds / n);
    }
    spdlog::info("step times of this worker: {}", ctx.step_times.text());
    for (std::size_t k = 0; trainer.sparse_batches() > 0 && k < trainer.sparse_tables().tables().size(); ++k) {
        const auto& t = trainer.sparse_tables().tables()[k];
        const double ids = double(trainer.sparse_distinct_ids(k)) / double(trainer.sparse_batches());
        spdlog::info(
            "sparse table {} [{} x {}]: {:.1f} distinct ids per batch of {} lookups; rows pulled and pushed "
            "{:.1f} KB per step (a dense table: {:.1f} MB each way)",
            t.name(), t.rows(), t.width(), ids, t.lookups(examples_per_update(training_)),
            2 * ids * double(t.width()) * 4 / 1e3, double(t.rows()) * double(t.width()) * 4 / 1e6);
    }
    spdlog::info("data: {}", describe_data_time(trainer.data(), ctx.train_seconds));
    blocked.reset();
    if (!end_before_done) hooks.end(ctx, last);
    // Saves were tried and the last one failed: the trained parameters are not on disk.
    if (code == kExitOk && checkpointer && checkpointer->failures() > 0 &&
        checkpointer->last_saved_step() != last.global_step) {
        const auto held = checkpointer->last_saved_step();
        spdlog::error(
            "the final checkpoint (global step {}) was not written: {}; the newest checkpoint holds {} "
            "(exit {})",
            last.global_step, checkpointer->last_error(), held ? fmt::format("step {}", *held) : std::string("no step"),
            kExitNoFinalCheckpoint);
        code = kExitNoFinalCheckpoint;
    }
    return code;
}

}  // namespace psrun::worker
