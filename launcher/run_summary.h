// psrun local's last word on a finished run: a short block built from the chief's
// <model-dir>/summary.json (workerd/chief_hooks.cpp SummaryHook) and the files in the model dir.
// Only figures that exist are printed; a missing one is said to be missing, never guessed.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace psrun::launcher {

// What of the chief's output exists in the model dir.
struct ModelDirFiles {
    bool metrics = false;  // metrics.jsonl
    bool curves = false;   // curves.png
    bool events = false;   // events.out.tfevents.* (TensorBoard)
};

// The block's lines (no trailing newline): final and best test accuracy, time to 99.0% and
// 99.2% (from the "evaluations" records' "elapsed_seconds": seconds since training started
// in this run), img/s, one line per worker restart ("restarts", psrun local --restart-workers),
// and where the model dir, curves.png and the TensorBoard events are.
// REQUIRES: summary["test_accuracy"] is a number.
std::vector<std::string> summary_lines(const nlohmann::json& summary, const std::string& model_dir,
                                       const ModelDirFiles& files);

// Reads <model_dir>/summary.json and looks for the other files; kNotFound with the path when
// summary.json is missing, unreadable or has no final test accuracy.
[[nodiscard]] Result<std::vector<std::string>> read_run_summary(const std::string& model_dir);

}  // namespace psrun::launcher
