#include "launcher/run_summary.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

namespace psrun::launcher {

std::optional<RunTargets> run_targets(const nlohmann::json& summary, const std::vector<double>& given,
                                      const MetricSpec& metric) {
    SecondsKind seconds = SecondsKind::kElapsed;
    const auto points = points_from_summary(summary, metric, seconds);
    if (points.empty()) return std::nullopt;
    const auto choice = choose_targets(metric, given.empty() ? given_targets_of(summary) : given,
                                       summary.value("dataset", std::string()));
    const auto times = time_to_targets(points, metric, choice);
    return RunTargets{describe_targets(times, metric, seconds, summary.value("start_step", 0LL)),
                      targets_to_json(times, metric, seconds)};
}

std::optional<RunTargets> read_run_targets(const std::string& model_dir, const std::vector<double>& given,
                                           const MetricSpec& metric) {
    std::ifstream in(model_dir + "/summary.json");
    if (!in) return std::nullopt;
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object()) return std::nullopt;
    return run_targets(j, given, metric);
}

std::vector<std::string> summary_lines(const nlohmann::json& summary, const std::string& model_dir,
                                       const ModelDirFiles& files, const MetricSpec& metric) {
    std::vector<std::string> lines;
    SecondsKind seconds = SecondsKind::kElapsed;
    const auto points = points_from_summary(summary, metric, seconds);
    lines.push_back(fmt::format("final {} {} at global step {}", metric.words,
                                format_metric(summary[metric.field].get<double>(), metric),
                                summary.value("global_step", 0LL)));
    if (!points.empty()) {
        const MetricPoint* best = &points.front();
        for (const MetricPoint& p : points)
            if (metric.higher_is_better ? p.value > best->value : p.value < best->value) best = &p;
        lines.push_back(fmt::format("best {} {} at global step {} ({} {})", metric.words,
                                    format_metric(best->value, metric), best->global_step, points.size(),
                                    points.size() == 1 ? "evaluation" : "evaluations"));
        lines.push_back(run_targets(summary, {}, metric)->line);
    } else {
        lines.push_back(fmt::format("no per-evaluation records: best {} and time to targets unknown", metric.words));
    }
    if (summary.contains("images_per_sec") && summary["images_per_sec"].is_number())
        lines.push_back(fmt::format("{:.0f} img/s over {:.1f} s of training ({} workers)",
                                    summary["images_per_sec"].get<double>(), summary.value("train_seconds", 0.0),
                                    summary.value("workers", 0)));
    if (const auto r = summary.find("restarts"); r != summary.end() && r->is_array()) {
        for (const auto& e : *r) {
            if (!e.is_object()) continue;
            const auto step = e.contains("global_step") && e["global_step"].is_number()
                                  ? std::to_string(e["global_step"].get<long long>())
                                  : std::string("unknown");
            // {"role": "ps", "ps": 1, ...}; records before --restart-ps have no role: workers.
            const std::string role = e.value("role", std::string("worker"));
            lines.push_back(fmt::format("restart: {} {} at {} (it {} at global step {})", role, e.value(role, 0),
                                        e.value("time", std::string("?")), e.value("status", std::string("?")), step));
        }
    }
    std::string where = fmt::format("model dir {} (summary.json{})", model_dir, files.metrics ? ", metrics.jsonl" : "");
    lines.push_back(where);
    lines.push_back(files.curves ? fmt::format("curves: {}/curves.png", model_dir)
                                 : std::string("curves: no curves.png (gnuplot missing?)"));
    lines.push_back(files.events ? fmt::format("TensorBoard: tensorboard --logdir {}", model_dir)
                                 : std::string("TensorBoard: no events.out.tfevents.* in the model dir"));
    return lines;
}

Result<std::vector<std::string>> read_run_summary(const std::string& model_dir, const MetricSpec& given) {
    namespace fs = std::filesystem;
    const std::string path = model_dir + "/summary.json";
    std::ifstream in(path);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    // A model without a softmax head (a loss in the graph: a regression) has no accuracy (-1):
    // its test loss is the figure.
    MetricSpec metric = given;
    if (j.is_object() && metric.field == "test_accuracy" && j.contains("test_accuracy") &&
        j["test_accuracy"].is_number() && j["test_accuracy"].get<double>() < 0 && j.contains("test_loss") &&
        j["test_loss"].is_number())
        metric = loss_metric();
    if (j.is_discarded() || !j.is_object() || !j.contains(metric.field) || !j[metric.field].is_number())
        return make_error(ErrorCode::kNotFound,
                          fmt::format("no final {}: {} is missing or unreadable", metric.words, path));
    ModelDirFiles files;
    std::error_code ec;
    files.metrics = fs::exists(model_dir + "/metrics.jsonl", ec);
    files.curves = fs::exists(model_dir + "/curves.png", ec);
    for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.events = true;
    return summary_lines(j, model_dir, files, metric);
}

}  // namespace psrun::launcher
