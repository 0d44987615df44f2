#include "workerd/worker_reports.h"

#include <fmt/ranges.h>
#include <spdlog/spdlog.h>

#include <filesystem>
#include <fstream>
#include <thread>

#include "workerd/trainer.h"

namespace psrun::worker {
namespace fs = std::filesystem;

nlohmann::json worker_report(RunContext& ctx) {
    return {{"worker", ctx.index},
            {"local_steps", ctx.local_steps},
            {"skipped_records", ctx.trainer->data().skipped_records()}};
}

std::string worker_report_path(const std::string& model_dir, std::uint32_t index) {
    return (fs::path(model_dir) / ("worker-" + std::to_string(index) + ".report.json")).string();
}

Result<void> write_worker_report(const std::string& model_dir, RunContext& ctx) {
    const std::string path = worker_report_path(model_dir, ctx.index);
    const std::string tmp = path + ".tmp";
    {
        std::ofstream out(tmp);
        out << worker_report(ctx).dump() << "\n";
        out.flush();
        if (!out) return make_error(ErrorCode::kIo, "cannot write " + tmp);
    }
    std::error_code ec;
    fs::rename(tmp, path, ec);
    if (ec) return make_error(ErrorCode::kIo, "cannot write " + path + ": " + ec.message());
    return {};
}

void clear_worker_reports(const std::string& model_dir, std::uint32_t num_workers) {
    std::error_code ec;
    for (std::uint32_t i = 0; i < num_workers; ++i) fs::remove(worker_report_path(model_dir, i), ec);
}

WorkerTotals sum_worker_reports(const std::string& model_dir, std::uint32_t num_workers, const nlohmann::json& chief,
                                std::chrono::milliseconds wait) {
    WorkerTotals totals;
    std::vector<nlohmann::json> reports(num_workers);
    const auto chief_index = chief.value("worker", 0u);
    if (chief_index < num_workers) reports[chief_index] = chief;
    const auto deadline = std::chrono::steady_clock::now() + wait;
    while (true) {
        totals.missing.clear();
        for (std::uint32_t i = 0; i < num_workers; ++i) {
            if (!reports[i].is_null()) continue;
            std::ifstream in(worker_report_path(model_dir, i));
            auto j = in ? nlohmann::json::parse(in, nullptr, false) : nlohmann::json();
            if (j.is_object() && j.value("worker", num_workers) == i) reports[i] = j;
            else totals.missing.push_back(i);
        }
        if (totals.missing.empty() || std::chrono::steady_clock::now() >= deadline) break;
        std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    for (const auto& r : reports) {
        const bool counted =
            r.is_object() && r.contains("skipped_records") && r["skipped_records"].is_number_unsigned();
        totals.by_worker.push_back(counted ? r["skipped_records"] : nlohmann::json(nullptr));
        if (counted) totals.skipped_records += r["skipped_records"].get<std::uint64_t>();
    }
    if (!totals.missing.empty())
        spdlog::warn("summary: no report from worker(s) {} in {}: their skipped_records are not counted",
                     fmt::format("{}", fmt::join(totals.missing, ", ")), model_dir);
    return totals;
}

}  // namespace psrun::worker
