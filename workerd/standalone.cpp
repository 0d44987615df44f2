#include "workerd/standalone.h"

#include <spdlog/spdlog.h>

#include <omp.h>
#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "common/clock.h"
#include "common/metric_targets.h"
#include "common/signals.h"
#include "common/utf8.h"
#include "workerd/class_names.h"
#include "workerd/data/data_time.h"
#include "workerd/datasets.h"
#include "workerd/nn/model_summary.h"
#include "workerd/run_recipe.h"

namespace psrun::worker {

namespace {

using Clock = std::chrono::steady_clock;

Result<void> write_json(const std::string& dir, const nlohmann::json& j) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    const std::string path = dir + "/summary.json";
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp);
        out << json_text(j, 2) << "\n";
        if (!out) return make_error(ErrorCode::kIo, "cannot write " + tmp);
    }
    std::filesystem::rename(tmp, path, ec);
    if (ec) return make_error(ErrorCode::kIo, "cannot write " + path + ": " + ec.message());
    return {};
}

}  // namespace

StandaloneTrainer::StandaloneTrainer(TrainOptions options) : options_(std::move(options)) {}

int StandaloneTrainer::run() {
    if (!options_.raw_ids.empty())
        throw UsageError(
            "--raw-ids needs psd (a table keyed by raw ids lives on the parameter servers, which admit and "
            "evict its rows): train through psd (psrun local --ps 1 --workers 1 -- ...)");
    if (!options_.sparse_embeddings.empty())
        throw UsageError(
            "--sparse-embedding needs psd (the table lives on the parameter servers); without psd every "
            "table is dense: drop the option");
    if (options_.ema_decay > 0.0f)
        throw UsageError(
            "--ema-decay: the moving average of the weights is kept by psd and saved in its checkpoints; "
            "standalone training writes none: train through psd (psrun local --ps 1 --workers 1 -- ...)");
    const TrainerConfig config = make_trainer_config(options_);
    set_compute_threads(options_.threads);
    SignalFd signals;

    auto data = load_datasets(options_, model_input(*config.model));
    if (!data) {
        spdlog::error("{}", data.error().message);
        return data_error_exit_code(data.error());
    }
    auto train = make_train_source(*data, config);
    train->start();  // a stream fills its shuffle buffer while the network is built
    Trainer trainer(config, std::move(train), make_test_source(*data));
    if (!options_.model_dir.empty() && !data_record(options_, *data).empty())
        if (auto wrote = write_data_record(options_.model_dir, data_record(options_, *data)); !wrote)
            spdlog::warn("{}", wrote.error().message);
    if (!options_.model_dir.empty())  // the recipe this run uses, for --recipe (workerd/run_recipe.h)
        if (auto wrote = write_run_recipe(options_.model_dir, effective_recipe(options_, config)); !wrote)
            spdlog::warn("no {}: {}", kRunRecipeFile, wrote.error().message);
    if (!options_.train_data.empty())
        spdlog::info("train data: {}; test data: {}", data->train_description, data->test_description);
    auto count = [](std::size_t n) { return n ? std::to_string(n) : std::string("streamed"); };
    spdlog::info(
        "standalone training: model {}, {} ({} train / {} test images), batch {}, {} steps, {} {} ({}), "
        "{} threads, {}",
        config.model->name, data->name, count(data->train_size()), count(data->test_size()),
        options_.accumulate_steps > 1 ? fmt::format("{} ({} micro-batches of {})", examples_per_update(options_),
                                                    options_.accumulate_steps, options_.batch_size)
                                      : std::to_string(options_.batch_size),
        options_.steps, options_.optimizer, options_.learning_rate, config.optimizer.effective_schedule().to_string(),
        omp_get_max_threads(), options_.precision);

    nlohmann::json evaluations = nlohmann::json::array();
    double train_seconds = 0, eval_seconds = 0, accuracy = -1;
    EvalMetrics figures;              // the latest evaluation
    std::uint64_t accuracy_step = 0;  // global step of the latest evaluation (0: none yet)
    float loss = 0;
    bool stopped = false;
    const std::uint64_t steps = static_cast<std::uint64_t>(options_.steps);
    const std::uint64_t eval_every = static_cast<std::uint64_t>(options_.eval_every);
    const std::uint64_t log_every = static_cast<std::uint64_t>(options_.log_every);
    auto evaluate = [&] {
        const auto t0 = Clock::now();
        figures = trainer.evaluate();
        accuracy = figures.score();
        accuracy_step = trainer.global_step();
        eval_seconds += std::chrono::duration<double>(Clock::now() - t0).count();
        nlohmann::json point = {{"global_step", trainer.global_step()}, {"train_seconds", train_seconds}};
        point.update(figures.json());
        evaluations.push_back(point);
    };
    double window_seconds = 0;
    std::uint64_t window_steps = 0;
    const double batch = static_cast<double>(examples_per_update(options_));  // examples per update
    while (trainer.global_step() < steps) {
        if (auto sig = signals.read_signal(); sig && *sig != SIGPIPE && *sig != SIGUSR2) {
            spdlog::warn("signal {}: stopping after step {}", *sig, trainer.global_step());
            stopped = true;
            break;
        }
        const auto t0 = Clock::now();
        loss = trainer.compute_gradients();
        trainer.apply_gradients();
        const double dt = std::chrono::duration<double>(Clock::now() - t0).count();
        train_seconds += dt;
        window_seconds += dt;
        ++window_steps;
        const std::uint64_t step = trainer.global_step();
        const bool eval_now = (eval_every > 0 && step % eval_every == 0) || step == steps;
        if (eval_now) evaluate();
        if (step % log_every == 0 || eval_now) {
            const double ips = double(window_steps) * batch / window_seconds;
            const double eta = double(steps - step) * batch / ips;
            // The latest test accuracy on every line (with its step when it is older).
            std::string acc;
            if (eval_now) acc = "  " + figures.text();
            else if (accuracy_step > 0) acc = fmt::format("  {} (step {})", figures.text(), accuracy_step);
            spdlog::info("step {}/{}  {:.0f} img/s  loss {:.4f}{}  ETA {}", step, steps, ips, loss, acc,
                         format_duration(eta));
            window_seconds = 0;
            window_steps = 0;
        }
    }
    if (stopped && trainer.global_step() > 0) evaluate();

    const double ips = train_seconds > 0 ? double(trainer.global_step()) * batch / train_seconds : 0.0;
    const BatchSource& source = trainer.data();
    spdlog::info("done: {} steps in {:.1f} s of training ({:.0f} img/s), {}; data: {}", trainer.global_step(),
                 train_seconds, ips, accuracy_step > 0 ? figures.text() : std::string("not evaluated"),
                 describe_data_time(source, train_seconds));
    const MetricSpec metric = accuracy_metric();
    SecondsKind seconds = SecondsKind::kTraining;
    const auto points = points_from_summary({{"evaluations", evaluations}}, metric, seconds);
    const auto times =
        accuracy_step > 0 && figures.score() < 0  // regression: no accuracy to reach
            ? std::vector<TargetTime>{}
            : time_to_targets(points, metric,
                              choose_targets(metric, given_target_accuracy(options_), dataset_name(options_)));
    if (!times.empty()) spdlog::info("{}", describe_targets(times, metric, seconds, 0));
    if (!options_.model_dir.empty()) {
        nlohmann::json summary = {
            {"global_step", trainer.global_step()},
            {"test_accuracy", accuracy},
            {"images_per_sec", ips},
            {"train_seconds", train_seconds},
            {"eval_seconds", eval_seconds},
            {"final_loss", loss},
            {"model", config.model->name},
            {"model_hash", nn::architecture_hash(*config.model)},
            {"dataset", data->name},
            {"data", {{"train", data->train_description}, {"test", data->test_description}}},
            {"batch_size", options_.batch_size},
            {"accumulate_steps", options_.accumulate_steps},
            {"effective_batch_size", examples_per_update(options_)},
            {"optimizer", options_.optimizer},
            {"learning_rate", options_.learning_rate},
            {"lr_schedule", config.optimizer.effective_schedule().to_string()},
            {"precision", options_.precision},
            {"threads", omp_get_max_threads()},
            {"seed", options_.seed},
            {"stopped_by_signal", stopped},
            {"evaluations", evaluations},
            {"targets", times.empty() ? nlohmann::json(nullptr) : targets_to_json(times, metric, seconds)},
        };
        summary.update(data_time_json(source, train_seconds));
        summary.update(optimizer_summary(config.optimizer));
        summary["label_smoothing"] = config.network.label_smoothing;
        summary["clipped_steps"] = trainer.clipped_steps();
        if (accuracy_step > 0) summary.update(figures.json());  // test_mse, test_mean_f1, ... where they apply
        if (auto written = write_json(options_.model_dir, summary); !written) {
            spdlog::error("{}", written.error().message);
            return kExitFailure;
        }
    }
    return kExitOk;
}

}  // namespace psrun::worker
