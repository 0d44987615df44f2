// workerd: the worker daemon. `--standalone` trains alone; `--evaluator` evaluates the job's
// checkpoints (workerd/evaluator.h); otherwise it is one worker of a parameter-server job
// (--ps ... --num-workers W), see workerd/distributed.h.
#include <malloc.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <exception>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "common/denormals.h"
#include "common/logging.h"
#include "common/model_dir_lock.h"
#include "common/option_checks.h"
#include "common/pause_detector.h"
#include "common/result.h"
#include "common/signals.h"
#include "common/suggest.h"
#include "workerd/distributed.h"
#include "workerd/evaluator.h"
#include "workerd/standalone.h"

namespace {

// "unknown option `--stpes`; did you mean `--steps`?" for the first unexpected argument that
// looks like an option; nullopt when none does (CLI11's message then).
std::optional<std::string> unknown_option_message(const CLI::App& app) {
    const auto extras = app.remaining();
    const auto it =
        std::find_if(extras.begin(), extras.end(), [](const std::string& a) { return a.rfind('-', 0) == 0; });
    if (it == extras.end()) return std::nullopt;
    const std::string opt = it->substr(0, it->find('='));
    std::vector<std::string> known;
    for (const CLI::Option* o : app.get_options())
        for (const std::string& n : o->get_lnames()) known.push_back("--" + n);
    const auto closest = psrun::closest_word(opt, known);
    return "unknown option `" + opt + "`" + (closest ? "; did you mean `" + *closest + "`?" : std::string()) +
           " (workerd --help lists the options)";
}

}  // namespace

int main(int argc, char** argv) {
    psrun::flush_denormals_to_zero();  // before any thread: they inherit it (common/denormals.h)
    psrun::block_termination_signals();
    // Every step receives 13 MB of parameters in ZeroMQ messages: keep those buffers on the heap
    // instead of fresh mmaps whose pages fault in again each step (as psd does).
    mallopt(M_MMAP_THRESHOLD, 256 << 20);
    mallopt(M_TRIM_THRESHOLD, 512 << 20);
    CLI::App app{"workerd: trains a model (--model; default TF's mnist_deep) on oneDNN, standalone or with psd"};
    psrun::worker::TrainOptions options;
    psrun::worker::ClusterOptions cluster;
    psrun::worker::EvaluatorOptions evaluation;
    // A repeated option keeps its last value: `psrun local --threads 1 -- --threads 2` and
    // jobs/train-local.sh's defaults followed by the caller's options both work.
    app.option_defaults()->multi_option_policy(CLI::MultiOptionPolicy::TakeLast);
    bool standalone = false;
    std::string log_level = "info", run_id;
    app.add_flag("--standalone", standalone, "train alone with the local optimizer (no psd)");
    app.add_option("--index", cluster.index, "worker index (0 <= I < --num-workers)")
        ->check(psrun::integer_in(0, psrun::kMaxTasks - 1));
    app.add_option("--log-level", log_level, "trace, debug, info, warn, error");
    app.add_option("--run-id", run_id,
                   "the run this process belongs to, for the model dir lock (psrun passes it; default: derived "
                   "from --ps, or this process alone with --standalone)");
    psrun::worker::add_cluster_options(app, cluster);
    psrun::worker::add_train_options(app, options);
    psrun::worker::add_evaluator_options(app, evaluation);
    if (psrun::wants_numeric_option_list(argc, argv)) {
        psrun::print_numeric_options(app, std::cout);
        return psrun::kExitOk;
    }
    try {
        app.parse(argc, argv);
    } catch (const CLI::ExtrasError& e) {
        if (const auto message = unknown_option_message(app)) {
            std::cerr << "workerd: error: " << *message << std::endl;
            return psrun::kExitUsage;
        }
        app.exit(e);
        return psrun::kExitUsage;
    } catch (const CLI::ParseError& e) {
        return app.exit(e) == 0 ? psrun::kExitOk : psrun::kExitUsage;
    }
    psrun::init_logging(cluster.evaluator ? "evaluator" : "workerd", static_cast<int>(cluster.index), log_level);
    try {
        if (cluster.join && app.count("--index") > 0)
            throw psrun::UsageError("--join takes its worker index from psd 0 (JOIN): drop --index");
        psrun::PauseDetector::process();  // start watching for stops of this process (issue 14); inside the try: its
                                          // thread may be refused (exit 1 with the reason, not std::terminate)
        if (options.synthetic_compute_ms > 0) {
            // Before the model-dir lock: a synthetic run must not touch a real run's directory.
            if (!options.model_dir.empty())
                throw psrun::UsageError(
                    "--synthetic-compute-ms trains nothing (it only exercises the exchange "
                    "with psd), so it cannot write or restore checkpoints: drop --model-dir " +
                    options.model_dir);
            spdlog::warn(
                "SYNTHETIC COMPUTE: every step sleeps {} ms (jitter {}) instead of training and pushes a "
                "constant gradient; nothing is learned (scale tests only)",
                options.synthetic_compute_ms, options.synthetic_compute_jitter);
        }
        std::unique_ptr<psrun::ModelDirLock> dir_lock;  // one run per model dir, held until exit
        if (!options.model_dir.empty()) {
            if (run_id.empty())
                run_id = standalone ? "standalone-" + psrun::this_host() + "-" + std::to_string(::getpid())
                                    : psrun::run_id_from_endpoints(cluster.ps);
            const std::string role =
                standalone          ? "workerd --standalone"
                : cluster.evaluator ? "evaluator " + std::to_string(cluster.index)
                : cluster.join      ? std::string("joining worker")
                                    : "worker " + std::to_string(cluster.index) + (cluster.chief ? " (chief)" : "");
            auto lock = psrun::ModelDirLock::acquire(options.model_dir, {run_id, role});
            if (!lock) throw psrun::UsageError(lock.error().message);
            dir_lock = std::move(*lock);
        }
        psrun::worker::resolve_model(app, options);
        psrun::worker::apply_global_batch_size(app, options, standalone ? 1 : std::max(1u, cluster.num_workers));
        if (standalone) {
            if (!cluster.ps.empty()) throw psrun::UsageError("--standalone trains without psd: drop --ps");
            if (cluster.evaluator) throw psrun::UsageError("--standalone and --evaluator exclude each other");
            return psrun::worker::StandaloneTrainer(options).run();
        }
        if (cluster.evaluator) {
            if (cluster.chief) throw psrun::UsageError("--evaluator and --chief exclude each other");
            return psrun::worker::Evaluator(cluster, options, evaluation).run();
        }
        // Workers never read the same examples: shard i/n of the training set by default.
        if (app.count("--shard") == 0 && cluster.num_workers > 0 && !cluster.join)
            options.shard = std::to_string(cluster.index) + "/" + std::to_string(cluster.num_workers);
        return psrun::worker::DistributedWorker(cluster, options).run();
    } catch (const psrun::UsageError& e) {
        spdlog::error("{}", e.what());
        return psrun::kExitUsage;
    } catch (const std::exception& e) {
        spdlog::error("{}", e.what());
        return psrun::kExitFailure;
    }
}
