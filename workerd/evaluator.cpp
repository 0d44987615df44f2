#include "workerd/evaluator.h"

#include <poll.h>
#include <spdlog/spdlog.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <memory>

#include "common/checkpoint_params.h"
#include "common/checkpoint_store.h"
#include "common/checkpointer.h"
#include "common/clock.h"
#include "common/model_dir_lock.h"
#include "common/option_checks.h"
#include "common/pause_detector.h"
#include "common/ps_client.h"
#include "common/zmq_util.h"
#include "workerd/datasets.h"
#include "workerd/model_identity.h"
#include "workerd/nn/model_summary.h"

namespace psrun::worker {
namespace {

using Clock = std::chrono::steady_clock;

constexpr std::chrono::milliseconds kProbeTimeout{3000};
constexpr int kProbeMisses = 2;  // consecutive unanswered probes before the psd count as gone

}  // namespace

void add_evaluator_options(CLI::App& app, EvaluatorOptions& o) {
    app.add_option(
           "--eval-timeout", o.eval_timeout,
           "evaluator: exit 1 after S seconds without a new checkpoint (and, with --ps, without an answer from psd)")
        ->check(positive_seconds())
        ->capture_default_str();
    app.add_option("--eval-poll", o.poll_interval, "evaluator: seconds between looks for new checkpoints")
        ->check(number_in(0.01, 60, "seconds"))
        ->capture_default_str();
}

Evaluator::Evaluator(ClusterOptions cluster, TrainOptions training, EvaluatorOptions options)
    : cluster_(std::move(cluster)), training_(std::move(training)), options_(options) {}

void Evaluator::stop() {
    stop_requested_.store(true);
    wake_.notify();
}

void Evaluator::read_previous_steps(const std::string& path) {
    std::ifstream in(path);
    for (std::string line; std::getline(in, line);) {
        const auto j = nlohmann::json::parse(line, nullptr, false);
        // An evaluation's record: it names its checkpoint (test_accuracy, or test_mse for regression).
        if (j.is_discarded() || !j.is_object() || !j.contains("checkpoint") || !j.contains("step") ||
            !j["step"].is_number_integer())
            continue;
        const auto step = j["step"].get<std::int64_t>();
        seen_.insert(step);
        last_evaluated_ = std::max(last_evaluated_, step);
    }
}

bool Evaluator::psd_alive() const {
    PsClientOptions po;
    po.endpoints = split_endpoint_list(cluster_.ps);
    po.index = cluster_.index;
    po.role = wire::Role::kTool;  // psd does not count a tool as a worker
    po.keys = keys_;
    po.auth = parse_auth_mode(cluster_.auth).value_or(kDefaultAuthMode);
    po.connect_timeout = kProbeTimeout;
    po.reply_timeout = kProbeTimeout;
    try {
        PsClient client(po);
        for (std::uint32_t i = 0; i < po.endpoints.size(); ++i)
            if (!client.stats(i)) return false;
        return true;
    } catch (const std::exception&) {
        return false;
    }
}

Result<Trainer*> Evaluator::trainer_for(const CheckpointInfo& info, bool& fatal) {
    fatal = false;
    PSRUN_TRY_ASSIGN(auto manifest, CheckpointStore::read_manifest(info));
    PSRUN_TRY_ASSIGN(auto model,
                     model_from_record(manifest_model(manifest), "checkpoint " + info.dir, *training_.description));
    const std::string hash = nn::architecture_hash(model);
    if (trainer_) {
        if (hash == nn::architecture_hash(trainer_->model())) return trainer_.get();
        return make_error(ErrorCode::kInvalidArgument, "it holds model " + describe_model(model) +
                                                           ", the earlier checkpoints " +
                                                           describe_model(trainer_->model()));
    }
    if (training_.model_given && hash != nn::architecture_hash(*training_.description)) {
        fatal = true;
        return make_error(ErrorCode::kInvalidArgument,
                          "checkpoint " + info.dir + " holds model " + describe_model(model) + " but --model " +
                              training_.model + " is " + describe_model(*training_.description) +
                              ": drop --model (the evaluator reads it from the checkpoint) or give that one");
    }
    TrainOptions options = training_;
    options.description = std::make_shared<const nn::ModelDescription>(std::move(model));
    const TrainerConfig config = make_trainer_config(options);
    auto data = load_datasets(training_, model_input(*config.model));
    if (!data) {
        fatal = true;
        return tl::unexpected(data.error());
    }
    data_ = std::make_unique<Datasets>(std::move(*data));
    trainer_ = std::make_unique<Trainer>(config, make_train_source(*data_, config), make_test_source(*data_));
    spdlog::info("evaluator: model {} from {} (test: {})", describe_model(trainer_->model()), info.dir,
                 data_->test_description);
    return trainer_.get();
}

Evaluator::Outcome Evaluator::evaluate_new(MetricsLog& metrics, EventWriter& events) {
    Outcome out;
    const CheckpointStore store(model_dir_, 1);
    for (const CheckpointInfo& info : store.list()) {
        if (!seen_.insert(info.step).second) continue;
        out.found_new = true;
        const auto t0 = Clock::now();
        bool fatal = false;
        auto trainer_or = trainer_for(info, fatal);
        if (fatal) {
            spdlog::error("{}", trainer_or.error().message);
            out.exit_code = data_error_exit_code(trainer_or.error());
            return out;
        }
        auto params = trainer_or ? load_checkpoint_parameters(info.dir, wire_tensors((*trainer_or)->params().tensors()))
                                 : Result<CheckpointParameters>(tl::unexpected(trainer_or.error()));
        if (!params) {
            spdlog::warn("skipping checkpoint {} (step {}): {}", info.dir, info.step,
                         std::filesystem::exists(info.dir)
                             ? params.error().message
                             : "removed before it could be read (--keep-checkpoints pruned it)");
            continue;
        }
        Trainer& trainer = **trainer_or;
        std::copy(params->values.begin(), params->values.end(), trainer.params().all().begin());
        trainer.set_global_step(static_cast<std::uint64_t>(info.step));
        const double load_seconds = seconds_since(t0);
        const auto t1 = Clock::now();
        const EvalMetrics figures = trainer.evaluate();
        const double eval_seconds = seconds_since(t1);
        last_evaluated_ = std::max(last_evaluated_, info.step);
        const nlohmann::json scores = figures.json();
        nlohmann::json record = scores;
        record["checkpoint"] = info.dir;
        record["load_seconds"] = load_seconds;
        record["eval_seconds"] = eval_seconds;
        metrics.write(info.step, record);
        for (const auto& [key, value] : scores.items())
            if (value.is_number()) events.add_scalar(key, info.step, value.get<float>(), unix_seconds());
        events.flush();
        spdlog::info("step {}/{}: {} ({}; load {:.2f} s, evaluation {:.1f} s)", info.step, training_.steps,
                     figures.text(), info.dir, load_seconds, eval_seconds);
        if (info.step >= training_.steps) out.reached_last = true;
    }
    return out;
}

int Evaluator::run() {
    if (training_.model_dir.empty())
        throw UsageError(
            "--evaluator needs --model-dir D: the directory the chief writes its checkpoints to "
            "(give the evaluator the same --model-dir as the chief)");
    if (training_.steps < 1)
        throw UsageError("--steps must be >= 1: the evaluator exits after the checkpoint of that step");
    if (!training_.description) throw std::logic_error("Evaluator: resolve_model() first");
    if (!cluster_.ps.empty() && !cluster_.no_auth && !cluster_.key_file.empty()) {
        auto read = read_job_key_file(cluster_.key_file);
        if (!read) throw UsageError(read.error().message);
        keys_ = *read;
    }
    const bool can_probe = !cluster_.ps.empty() && (keys_ || cluster_.no_auth);
    set_compute_threads(training_.threads);
    SignalFd signals;

    std::error_code ec;
    model_dir_ = std::filesystem::absolute(training_.model_dir, ec).lexically_normal().string();
    // Evaluator 0 writes eval/ (TensorBoard's "eval" run); a further one eval-<i>/, never the same files.
    const std::string eval_dir =
        model_dir_ + (cluster_.index == 0 ? std::string("/eval") : "/eval-" + std::to_string(cluster_.index));
    std::filesystem::create_directories(eval_dir, ec);
    if (ec)
        throw UsageError("--model-dir " + training_.model_dir + ": cannot create " + eval_dir + ": " + ec.message());
    read_previous_steps(eval_dir + "/metrics.jsonl");
    if (last_evaluated_ >= training_.steps) {
        spdlog::info("{}/metrics.jsonl already holds step {} >= --steps {}: nothing left to evaluate", eval_dir,
                     last_evaluated_, training_.steps);
        return kExitOk;
    }
    MetricsLog metrics(eval_dir + "/metrics.jsonl");
    EventWriter events(eval_dir, this_host());
    spdlog::info("evaluator: watching {} for checkpoints up to step {} (the model they record; exit 1 {})", model_dir_,
                 training_.steps,
                 can_probe ? fmt::format("when the psd are gone, or after {} s without a checkpoint or a psd",
                                         options_.eval_timeout)
                           : fmt::format("after {} s without a new checkpoint", options_.eval_timeout));
    return watch(metrics, events, signals, can_probe);
}

int Evaluator::watch(MetricsLog& metrics, EventWriter& events, SignalFd& signals, bool can_probe) {
    auto last_progress = Clock::now();  // a new checkpoint, or psd answering: the job is alive
    // Probe often enough that a live psd always answers within --eval-timeout.
    const double probe_interval = std::min(options_.probe_interval, options_.eval_timeout / 3);
    auto last_probe = Clock::now() - std::chrono::hours(1);
    bool psd_seen = false;
    int psd_missed = 0;
    while (true) {
        const bool stopping = stop_requested_.load();
        const Outcome found = evaluate_new(metrics, events);
        if (found.exit_code >= 0) return found.exit_code;
        if (found.found_new) last_progress = Clock::now();
        if (found.reached_last) {
            spdlog::info("evaluated the last step's checkpoint (step {}): done", last_evaluated_);
            return kExitOk;
        }
        if (stopping) {
            spdlog::info("stopped before the last step's checkpoint; last evaluated step {}", last_evaluated_);
            return kExitOk;
        }
        if (can_probe && seconds_since(last_probe) >= probe_interval && !found.found_new) {
            last_probe = Clock::now();
            if (psd_alive()) {
                psd_seen = true;
                psd_missed = 0;
                last_progress = Clock::now();
            } else if (psd_seen && ++psd_missed >= kProbeMisses) {
                const Outcome last = evaluate_new(metrics, events);
                if (last.exit_code >= 0) return last.exit_code;
                if (last.reached_last) return kExitOk;
                spdlog::error(
                    "the job's psd ({}) stopped answering and no checkpoint of step {} arrived (last "
                    "evaluated step {}): the training ended early; see the workers' logs",
                    cluster_.ps, training_.steps, last_evaluated_);
                return kExitFailure;
            }
        }
        // Time this evaluator was itself stopped (a suspended job) is nobody's silence.
        if (seconds_since(PauseDetector::process().window_start(last_progress)) >= options_.eval_timeout) {
            spdlog::error(
                "no new checkpoint in {} {}for {} s (last evaluated step {}, waiting for step {}): is the "
                "chief running with --model-dir {}?",
                model_dir_, can_probe ? "and no answer from the psd " : "", options_.eval_timeout, last_evaluated_,
                training_.steps, training_.model_dir);
            return kExitFailure;
        }
        pollfd fds[2] = {{signals.fd(), POLLIN, 0}, {wake_.fd(), POLLIN, 0}};
        ::poll(fds, 2, static_cast<int>(options_.poll_interval * 1000));
        wake_.drain();
        while (auto sig = signals.read_signal()) {
            if (*sig == SIGPIPE || *sig == SIGUSR2) continue;
            spdlog::info("signal {}: one last look for new checkpoints, then exit", *sig);
            stop_requested_.store(true);
        }
    }
}

}  // namespace psrun::worker
