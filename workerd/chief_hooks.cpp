#include "workerd/chief_hooks.h"

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>

#include <omp.h>

#include "common/checkpoint_params.h"
#include "common/clock.h"
#include "common/metric_targets.h"
#include "common/utf8.h"
#include "workerd/data/data_time.h"
#include "workerd/nn/model_summary.h"
#include "workerd/worker_reports.h"

namespace psrun::worker {

double eta_seconds(std::uint64_t remaining, std::uint64_t steps, double window_seconds, double eval_seconds) {
    const double training = window_seconds - std::clamp(eval_seconds, 0.0, window_seconds);
    if (steps == 0 || training <= 0) return 0.0;
    return double(remaining) * training / double(steps);
}

namespace {

// Examples per global step: one worker's update in async mode, every worker's gradient in sync
// mode (psd averages --replicas-to-aggregate of them; psrun's default: the number of workers).
std::int64_t examples_per_global_step(const RunContext& ctx) {
    const bool sync = ctx.client && ctx.client->sync();
    return examples_per_update(*ctx.options) * (sync ? ctx.num_workers : 1);
}

}  // namespace

void ProgressHook::begin(RunContext& ctx) {
    window_start_ = Clock::now();
    window_global_ = ctx.start_step;
    window_eval_seconds_ = ctx.eval_seconds;
}

void ProgressHook::after_step(RunContext& ctx, const StepResult& step) {
    ++window_local_;
    window_loss_ += step.loss;
    const auto every = static_cast<std::uint64_t>(ctx.options->log_every);
    const bool crossed = step.global_step / every > window_global_ / every;
    if (!crossed && !ctx.stop) return;
    const double dt = std::max(1e-9, seconds_since(window_start_));
    const double batch = static_cast<double>(examples_per_update(*ctx.options));
    const double worker_ips = double(window_local_) * batch / dt;
    const double all_ips = double(step.global_step - window_global_) * double(examples_per_global_step(ctx)) / dt;
    const double loss = window_loss_ / double(window_local_);
    const double eta = eta_seconds(ctx.last_step - std::min(ctx.last_step, step.global_step),
                                   step.global_step - std::min(step.global_step, window_global_), dt,
                                   ctx.eval_seconds - window_eval_seconds_);
    // The latest test accuracy on every line (with the step it was measured at when older).
    std::string accuracy;
    if (ctx.test_metrics)
        accuracy = ctx.accuracy_step == step.global_step
                       ? "  " + ctx.test_metrics->text()
                       : fmt::format("  {} (step {})", ctx.test_metrics->text(), ctx.accuracy_step);
    spdlog::info("step {}/{}  {:.0f} img/s (all workers {:.0f})  loss {:.4f}{}  ETA {}", step.global_step,
                 ctx.last_step, worker_ips, all_ips, loss, accuracy, format_duration(eta));
    if (ctx.metrics)
        ctx.metrics->write(static_cast<std::int64_t>(step.global_step),
                           {{"loss", loss}, {"images_per_sec", all_ips}, {"worker_images_per_sec", worker_ips}});
    if (ctx.events) {
        const double now = unix_seconds();
        ctx.events->add_scalar("loss", static_cast<std::int64_t>(step.global_step), static_cast<float>(loss), now);
        ctx.events->add_scalar("images_per_sec", static_cast<std::int64_t>(step.global_step),
                               static_cast<float>(all_ips), now);
        ctx.events->flush();
    }
    last_aggregate_ips_ = all_ips;
    window_start_ = Clock::now();
    window_global_ = step.global_step;
    window_eval_seconds_ = ctx.eval_seconds;
    window_local_ = 0;
    window_loss_ = 0;
}

void ProgressHook::end(RunContext& ctx, const StepResult& last) {
    const double batch = static_cast<double>(examples_per_update(*ctx.options));
    const double t = std::max(1e-9, ctx.train_seconds);
    spdlog::info(
        "done: global step {}, {} steps by this worker in {:.1f} s ({:.0f} img/s; all workers {:.0f} "
        "img/s){}",
        last.global_step, ctx.local_steps, ctx.train_seconds, double(ctx.local_steps) * batch / t,
        double(last.global_step - ctx.start_step) * double(examples_per_global_step(ctx)) / t,
        ctx.test_metrics ? ", final " + ctx.test_metrics->text() : std::string(" (not evaluated: preempted)"));
}

void EvalHook::evaluate(RunContext& ctx, std::uint64_t global_step) {
    const auto t0 = Clock::now();
    ctx.test_metrics = ctx.trainer->evaluate();
    ctx.test_accuracy = ctx.test_metrics->score();
    ctx.accuracy_step = global_step;
    ctx.eval_seconds += seconds_since(t0);
    last_eval_ = global_step;
    const nlohmann::json figures = ctx.test_metrics->json();
    nlohmann::json point = {{"global_step", global_step}, {"elapsed_seconds", ctx.elapsed()}};
    point.update(figures);
    ctx.evaluations.push_back(point);
    if (ctx.metrics) ctx.metrics->write(static_cast<std::int64_t>(global_step), figures);
    if (ctx.events) {
        for (const auto& [key, value] : figures.items())
            if (value.is_number())
                ctx.events->add_scalar(key, static_cast<std::int64_t>(global_step), value.get<float>(), unix_seconds());
        ctx.events->flush();
    }
}

void EvalHook::after_step(RunContext& ctx, const StepResult& step) {
    const auto every = static_cast<std::uint64_t>(ctx.options->eval_every);
    if (every == 0 || ctx.stop || step.global_step / every <= last_eval_ / every) return;
    if (ctx.interrupted && ctx.interrupted()) return;  // preempted: checkpoint first, evaluate in the next run
    evaluate(ctx, step.global_step);
    // The evaluation kept this worker silent: tell psd it is alive.
    if (auto hb = ctx.client->heartbeat(); !hb) spdlog::warn("heartbeat after evaluation: {}", hb.error().message);
}

void EvalHook::end(RunContext& ctx, const StepResult& last) {
    if (ctx.stopped_by_signal) return;  // preempted: exit quickly; the resumed run evaluates
    if (!ctx.test_metrics || ctx.accuracy_step != last.global_step) evaluate(ctx, last.global_step);
    spdlog::info("{} at global step {}", ctx.test_metrics->text(), last.global_step);
    evaluate_average(ctx, last);
}

void EvalHook::evaluate_average(RunContext& ctx, const StepResult& last) {
    if (ctx.options->ema_decay <= 0.0f) return;
    if (!ctx.last_checkpoint || ctx.last_checkpoint->step != static_cast<std::int64_t>(last.global_step)) {
        spdlog::warn("no evaluation of the moving average: no checkpoint of step {} holds it", last.global_step);
        return;
    }
    if (ctx.trainer->sparse()) {
        spdlog::warn(
            "no evaluation of the moving average here: a sparse table's averaged rows are in the checkpoint, "
            "not on psd's serving path; evaluate it with psrun eval --ema --model-dir {}",
            ctx.options->model_dir);
        return;
    }
    auto& params = ctx.trainer->params();
    auto average = load_checkpoint_parameters(ctx.last_checkpoint->dir, wire_tensors(params.tensors()),
                                              CheckpointValues::kAverage);
    if (!average) {
        spdlog::warn("no evaluation of the moving average: {}", average.error().message);
        return;
    }
    // Training is over: the weights are swapped for the average and back (with shared memory the
    // buffer is psd's mirror, which no update writes any more).
    const auto t0 = Clock::now();
    const std::vector<float> weights(params.all().begin(), params.all().end());
    std::copy(average->values.begin(), average->values.end(), params.all().begin());
    ctx.average_metrics = ctx.trainer->evaluate();
    std::copy(weights.begin(), weights.end(), params.all().begin());
    ctx.eval_seconds += seconds_since(t0);
    spdlog::info("moving average of the weights (--ema-decay {}): {}", ctx.options->ema_decay,
                 ctx.average_metrics->text());
}

namespace {

// Logs the time to the run's accuracy targets (common/metric_targets.h) and returns their
// summary.json form; null without an evaluation (a preempted run).
nlohmann::json log_time_to_targets(const RunContext& ctx) {
    if (ctx.test_metrics && ctx.test_metrics->score() < 0) return nullptr;  // regression: no accuracy to reach
    const MetricSpec metric = accuracy_metric();
    SecondsKind seconds = SecondsKind::kElapsed;
    const auto points = points_from_summary({{"evaluations", ctx.evaluations}}, metric, seconds);
    const auto times = time_to_targets(
        points, metric, choose_targets(metric, given_target_accuracy(*ctx.options), dataset_name(*ctx.options)));
    if (times.empty()) return nullptr;
    spdlog::info("{}", describe_targets(times, metric, seconds, static_cast<std::int64_t>(ctx.start_step)));
    return targets_to_json(times, metric, seconds);
}

}  // namespace

void SummaryHook::end(RunContext& ctx, const StepResult& last) {
    const auto& o = *ctx.options;
    const nlohmann::json targets = log_time_to_targets(ctx);
    if (o.model_dir.empty()) return;
    const double t = std::max(1e-9, ctx.train_seconds);
    auto per_step = [&](double seconds) { return ctx.local_steps ? 1000.0 * seconds / double(ctx.local_steps) : 0.0; };
    nlohmann::json summary = {
        {"global_step", last.global_step},
        {"test_accuracy", ctx.test_accuracy},
        {"images_per_sec", double(last.global_step - ctx.start_step) * double(examples_per_global_step(ctx)) / t},
        {"worker_images_per_sec", double(ctx.local_steps) * double(examples_per_update(o)) / t},
        {"train_seconds", ctx.train_seconds},
        {"eval_seconds", ctx.eval_seconds},
        {"workers", ctx.num_workers},
        {"start_step", ctx.start_step},
        {"chief_steps", ctx.local_steps},
        {"chief_ms_per_step",
         {{"compute", per_step(ctx.compute_seconds)},
          {"exchange", per_step(ctx.exchange_seconds)},
          {"param_copy", per_step(ctx.copy_seconds)},
          {"data_wait", per_step(ctx.trainer->data().data_time().waited)},
          {"data_handling", per_step(ctx.trainer->data().data_time().handling)}}},
        // The chief's steps end to end (its checkpoints' waits included): a stall shows in the longest.
        {"chief_step_ms",
         {{"median", 1e3 * ctx.step_times.quantile(0.5)},
          {"p99", 1e3 * ctx.step_times.quantile(0.99)},
          {"longest", 1e3 * ctx.step_times.longest()},
          {"longest_at_step", ctx.step_times.longest_step()}}},
        {"final_loss", last.loss},
        {"model", ctx.trainer->model().name},
        {"model_hash", nn::architecture_hash(ctx.trainer->model())},
        {"dataset", dataset_name(o)},
        {"batch_size", o.batch_size},
        {"accumulate_steps", o.accumulate_steps},
        // Examples per update psd applies: one worker's in async mode, every worker's in sync mode.
        {"effective_batch_size", examples_per_global_step(ctx)},
        {"optimizer", o.optimizer},
        {"learning_rate", o.learning_rate},
        {"lr_schedule", make_trainer_config(o).optimizer.effective_schedule().to_string()},
        {"precision", o.precision},
        {"threads", omp_get_max_threads()},
        {"seed", o.seed},
        {"stopped_by_signal", ctx.stopped_by_signal},
        {"checkpoint_step", ctx.checkpointer && ctx.checkpointer->last_saved_step()
                                ? nlohmann::json(*ctx.checkpointer->last_saved_step())
                                : nlohmann::json(nullptr)},
        {"checkpoint_failures", ctx.checkpointer ? ctx.checkpointer->failures() : 0},
        {"checkpoint_error", ctx.checkpointer && ctx.checkpointer->failures()
                                 ? nlohmann::json(ctx.checkpointer->last_error())
                                 : nlohmann::json(nullptr)},
        {"metrics_records_lost", ctx.metrics ? ctx.metrics->dropped() : 0},
        {"evaluations", ctx.evaluations},
        {"targets", targets},
    };
    summary.update(data_time_json(ctx.trainer->data(), ctx.train_seconds));
    if (ctx.num_workers > 1 && ctx.client) {  // distributed: every worker's counters (workerd/worker_reports.h)
        const auto wait = ctx.stopped_by_signal ? std::chrono::milliseconds(0) : std::chrono::milliseconds(10000);
        const WorkerTotals totals = sum_worker_reports(o.model_dir, ctx.num_workers, worker_report(ctx), wait);
        summary["skipped_records"] = totals.skipped_records;
        summary["skipped_records_by_worker"] = totals.by_worker;
        summary["workers_without_report"] = totals.missing;
    }
    if (ctx.ps_figures.is_object()) summary.update(ctx.ps_figures);  // elastic, staleness, keyed_tables
    summary.update(optimizer_summary(make_trainer_config(o).optimizer));
    summary["label_smoothing"] = o.label_smoothing;
    summary["chief_clipped_steps"] = ctx.trainer->clipped_steps();   // the chief's own gradients only
    if (ctx.test_metrics) summary.update(ctx.test_metrics->json());  // test_mse, test_mean_f1, ... where they apply
    if (ctx.average_metrics) {                                       // ema_test_accuracy, ema_test_loss, ...
        const nlohmann::json figures = ctx.average_metrics->json();
        for (auto it = figures.begin(); it != figures.end(); ++it) summary["ema_" + it.key()] = it.value();
    }
    const std::string path = o.model_dir + "/summary.json";
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp);
        out << json_text(summary, 2) << "\n";
        if (!out) throw std::runtime_error("cannot write " + tmp);
    }
    std::error_code ec;
    std::filesystem::rename(tmp, path, ec);
    if (ec) throw std::runtime_error("cannot write " + path + ": " + ec.message());
    spdlog::info("wrote {}", path);
    if (ctx.metrics) {
        if (auto plot = plot_curves(ctx.metrics->path(), o.model_dir + "/curves.png"); !plot)
            spdlog::warn("no curves.png: {}", plot.error().message);
    }
}

namespace {

void report_checkpoint(RunContext& ctx, std::uint64_t global_step, const Result<std::optional<CheckpointInfo>>& saved,
                       bool last, Clock::time_point t0) {
    if (saved && !*saved) return;  // still being written
    if (!saved) {
        // psd stopped the run (--max-bad-grads) and answered this request instead of the next exchange.
        if (saved.error().code == ErrorCode::kAborted) {
            spdlog::error("{}", saved.error().message);
            ctx.aborted = saved.error();
            return;
        }
        const auto& c = *ctx.checkpointer;
        const auto held = c.last_saved_step();
        spdlog::error("{} (failure {}; the newest checkpoint holds {}; {})", saved.error().message, c.failures(),
                      held ? fmt::format("step {}", *held) : std::string("no step"),
                      last ? std::string("this was the final one")
                           : fmt::format("next try in {:.0f} s or at the last step", c.retry_in().count() / 1000.0));
        if (ctx.metrics)
            ctx.metrics->write(static_cast<std::int64_t>(global_step),
                               {{"checkpoint_failed", saved.error().message}, {"checkpoint_failures", c.failures()}});
        return;
    }
    const CheckpointInfo& info = **saved;
    ctx.last_checkpoint = info;
    spdlog::info("checkpoint {} ({:.0f} ms of the chief's time)", info.dir, 1000 * seconds_since(t0));
    if (ctx.metrics)
        ctx.metrics->write(static_cast<std::int64_t>(global_step),
                           {{"checkpoint", info.dir}, {"checkpoint_step", info.step}});
}

}  // namespace

void CheckpointHook::after_step(RunContext& ctx, const StepResult& step) {
    if (ctx.checkpointer == nullptr) return;
    if (ctx.interrupted && ctx.interrupted()) return;  // the preemption checkpoint follows at once
    auto& c = *ctx.checkpointer;
    const bool last = step.finished || step.global_step >= ctx.last_step;
    if (c.saving()) {  // one being written by psd meanwhile: committed once every shard is done
        const auto t0 = Clock::now();
        report_checkpoint(ctx, step.global_step, c.poll(*ctx.client, last), last, t0);
        if (ctx.aborted) return;
    }
    if (!c.due(step.global_step, last)) return;
    const auto t0 = Clock::now();
    const nlohmann::json extra = {{"workers", ctx.num_workers},
                                  {"chief_local_steps", ctx.local_steps},
                                  {"label_smoothing", ctx.options->label_smoothing}};
    // The final checkpoint is waited for (the evaluation and summary.json name it); the others
    // are written by psd while training goes on.
    if (last) {
        auto saved = c.save(*ctx.client, step.global_step, extra);
        report_checkpoint(ctx, step.global_step,
                          saved ? Result<std::optional<CheckpointInfo>>(*saved)
                                : Result<std::optional<CheckpointInfo>>(tl::unexpected(saved.error())),
                          last, t0);
        return;
    }
    report_checkpoint(ctx, step.global_step, c.start_save(*ctx.client, step.global_step, extra), last, t0);
}

void add_chief_hooks(HookList& hooks) {
    hooks.add(std::make_unique<CheckpointHook>());  // before the evaluation: saves first
    hooks.add(std::make_unique<EvalHook>());
    hooks.add(std::make_unique<ProgressHook>());
    hooks.add(std::make_unique<SummaryHook>());
}

}  // namespace psrun::worker
