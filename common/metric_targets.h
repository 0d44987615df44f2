// Time to a target: when a run's evaluations first reached thresholds that fit the run. The
// thresholds are those the user gave (--target-accuracy), else the dataset's customary ones
// (MNIST: 99.0% and 99.2% test accuracy), else two derived from the run itself: the best value
// it reached and "within one point of the best" (MetricSpec::near_best_margin).
//
// The metric is data (MetricSpec: its summary.json field, its words, which way is better), so a
// run that is not a classification plugs in its own (e.g. a test MSE, lower is better) without
// touching this code. Today's metric is test accuracy (accuracy_metric()).
//
// Used by the chief (its log line and summary.json "targets"), by psrun's end-of-run summary
// (launcher/run_summary.h) and by psrun eval. Pure functions; thread-compatible.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace psrun {

struct MetricSpec {
    std::string field = "test_accuracy";  // its name in summary.json and its "evaluations" records
    std::string words = "test accuracy";  // in sentences: "best test accuracy 99.31%"
    bool higher_is_better = true;
    bool percent = true;  // a fraction in [0, 1], printed as a percentage
    // "Within one point of the best": the margin in the metric's own units (accuracy: 0.01, one
    // percentage point).
    double near_best_margin = 0.01;
};

// Test accuracy, higher is better, one point = 0.01.
MetricSpec accuracy_metric();
// Test loss, lower is better, not a percentage (a model whose loss is in its graph, without a
// softmax head, reports no accuracy).
MetricSpec loss_metric();

// One evaluation of a run.
struct MetricPoint {
    std::int64_t global_step = 0;
    double value = 0;
    std::optional<double> seconds;  // since training started in this run (see SecondsKind)
};

// What the points' seconds count.
enum class SecondsKind {
    kElapsed,   // wall time since training started ("elapsed_seconds": the chief's, evaluations included)
    kTraining,  // training time only ("train_seconds": workerd --standalone's, evaluations excluded)
};

enum class TargetKind {
    kGiven,     // --target-accuracy
    kDefault,   // the dataset's customary threshold
    kBest,      // the best value the run reached
    kNearBest,  // within near_best_margin of the best
};

struct TargetTime {
    TargetKind kind = TargetKind::kGiven;
    double threshold = 0;
    bool reached = false;
    std::int64_t global_step = 0;   // of the first evaluation at or beyond the threshold
    std::optional<double> seconds;  // that evaluation's time, when recorded
};

// The thresholds of a run: `given` when not empty, else the dataset's defaults (test accuracy on
// "mnist": 0.99 and 0.992), else none (then time_to_targets derives best and near-best).
struct TargetChoice {
    std::vector<double> thresholds;
    TargetKind kind = TargetKind::kBest;  // kGiven, kDefault, or kBest for "derive from the run"
};
TargetChoice choose_targets(const MetricSpec& metric, const std::vector<double>& given, const std::string& dataset);

// Parses --target-accuracy "A,B,...": each a percentage (99.2, 99.2%) when above 1, else a
// fraction (0.992); 1 to 8 values in (0, 100%]. Returns the fractions, sorted from the easiest
// to the hardest, duplicates removed; kInvalidArgument naming the bad item otherwise.
[[nodiscard]] Result<std::vector<double>> parse_target_accuracy(std::string_view text);

// The first evaluation (in the order given) at or beyond each threshold of `choice`; with no
// thresholds, the best value of `points` and the near-best threshold. Empty when `points` is.
std::vector<TargetTime> time_to_targets(const std::vector<MetricPoint>& points, const MetricSpec& metric,
                                        const TargetChoice& choice);

// One line for a log or a summary, e.g.
//   "time to 99.0% in 70 s (global step 2500); 99.2% not reached (seconds since training started)"
//   "time to the best test accuracy (91.23%) in 120 s (global step 2400); to within 1 point of it
//    (90.23%) in 61 s (global step 1200) (seconds since training started)"
// `start_step` > 0 says the run resumed there. REQUIRES: `times` not empty.
std::string describe_targets(const std::vector<TargetTime>& times, const MetricSpec& metric, SecondsKind seconds,
                             std::int64_t start_step);

// A measured value: "99.20%" (percent metrics, two decimals) or "0.0312" (4 significant digits).
std::string format_metric(double value, const MetricSpec& metric);
// A threshold: "99.0%", "99.25%" (percent metrics: one or two decimals) or "0.0312".
std::string format_threshold(double value, const MetricSpec& metric);

// summary.json's form: {"metric": {"field", "higher_is_better"}, "seconds": "elapsed"|"training",
// "targets": [{"kind", "threshold", "reached", "global_step", "seconds"}]} ("global_step" and
// "seconds" only when reached; "seconds" only when recorded).
nlohmann::json targets_to_json(const std::vector<TargetTime>& times, const MetricSpec& metric, SecondsKind seconds);

// The evaluations of a summary.json ("evaluations": [{global_step, <metric.field>,
// elapsed_seconds | train_seconds}]): records without a numeric value are skipped. Sets
// `seconds` to what the records' times count (elapsed when any record has elapsed_seconds).
std::vector<MetricPoint> points_from_summary(const nlohmann::json& summary, const MetricSpec& metric,
                                             SecondsKind& seconds);

// The thresholds a summary.json's "targets" records as given (--target-accuracy); empty when
// it records none (defaults or derived ones are recomputed from the dataset and the points).
std::vector<double> given_targets_of(const nlohmann::json& summary);

const char* to_string(TargetKind kind);

}  // namespace psrun
