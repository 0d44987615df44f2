// psrun local's last word on a finished run: a short block built from the chief's
// <model-dir>/summary.json (workerd/chief_hooks.cpp SummaryHook) and the files in the model dir.
// Only figures that exist are printed; a missing one is said to be missing, never guessed.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/metric_targets.h"
#include "common/result.h"

namespace psrun::launcher {

// What of the chief's output exists in the model dir.
struct ModelDirFiles {
    bool metrics = false;  // metrics.jsonl
    bool curves = false;   // curves.png
    bool events = false;   // events.out.tfevents.* (TensorBoard)
};

// The block's lines (no trailing newline): the final and best value of `metric`, the time to the
// run's targets (common/metric_targets.h: those summary.json's "targets" records as given, else
// the dataset's customary ones, else the best value and near it; from the "evaluations"
// records' seconds), img/s, one line per daemon restart ("restarts", psrun local
// --restart-workers and --restart-ps), and where the model dir, curves.png and the TensorBoard events are.
// REQUIRES: summary[metric.field] is a number.
std::vector<std::string> summary_lines(const nlohmann::json& summary, const std::string& model_dir,
                                       const ModelDirFiles& files, const MetricSpec& metric = accuracy_metric());

// The time to a run's targets: the line summary_lines prints and summary.json's JSON form.
struct RunTargets {
    std::string line;
    nlohmann::json json;
};

// From a summary.json's evaluations: `given` thresholds (fractions) when not empty, else those
// the summary records as given, else the dataset's, else best and near-best. nullopt when the
// summary has no evaluation of `metric`.
std::optional<RunTargets> run_targets(const nlohmann::json& summary, const std::vector<double>& given,
                                      const MetricSpec& metric = accuracy_metric());

// The same from <model_dir>/summary.json; nullopt when it is missing or unreadable too.
std::optional<RunTargets> read_run_targets(const std::string& model_dir, const std::vector<double>& given,
                                           const MetricSpec& metric = accuracy_metric());

// Reads <model_dir>/summary.json and looks for the other files; kNotFound with the path when
// summary.json is missing, unreadable or has no final value of `metric`. Where `metric` is the
// accuracy and the run has none (-1: a loss in the graph without a softmax head), the lines
// report its test loss instead.
[[nodiscard]] Result<std::vector<std::string>> read_run_summary(const std::string& model_dir,
                                                                const MetricSpec& metric = accuracy_metric());

}  // namespace psrun::launcher
