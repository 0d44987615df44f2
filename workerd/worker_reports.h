// Counters of every worker for the chief's summary.json (today: skipped_records, the corrupt
// records --corrupt-records skip dropped). Each non-chief worker writes its own counters to
// <model-dir>/worker-<i>.report.json (atomically: a temp file, then rename) just before its
// DONE; the chief removes stale reports when its run starts (no worker can have ended then) and
// sums them with its own at its end. The model dir is shared by every host of a job
// (docs/running.md), so this also works under Slurm with workers on other hosts. A restarted
// worker's report holds only its last incarnation.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/result.h"
#include "workerd/hooks.h"

namespace psrun::worker {

// This worker's counters: {"worker", "local_steps", "skipped_records"}.
nlohmann::json worker_report(RunContext& ctx);

std::string worker_report_path(const std::string& model_dir, std::uint32_t index);

// Writes worker_report(ctx) to worker_report_path(); an error is returned, not thrown.
[[nodiscard]] Result<void> write_worker_report(const std::string& model_dir, RunContext& ctx);

// Removes every worker's report (the chief, when its run starts).
void clear_worker_reports(const std::string& model_dir, std::uint32_t num_workers);

struct WorkerTotals {
    std::uint64_t skipped_records = 0;                   // summed over the chief and every report found
    nlohmann::json by_worker = nlohmann::json::array();  // skipped_records per worker (null: no report)
    std::vector<std::uint32_t> missing;                  // workers whose report did not come
};

// The chief's own counters (`chief`) plus every other worker's report, waiting up to `wait`
// for reports that are not there yet (a worker still finishing its last step).
WorkerTotals sum_worker_reports(const std::string& model_dir, std::uint32_t num_workers, const nlohmann::json& chief,
                                std::chrono::milliseconds wait);

}  // namespace psrun::worker
