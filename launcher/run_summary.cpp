#include "launcher/run_summary.h"

#include <fmt/format.h>

#include <filesystem>
#include <fstream>

namespace psrun::launcher {
namespace {

struct Evaluation {
    double accuracy = 0;
    long long step = 0;
    std::optional<double> seconds;
};

std::vector<Evaluation> evaluations_of(const nlohmann::json& summary) {
    std::vector<Evaluation> out;
    const auto it = summary.find("evaluations");
    if (it == summary.end() || !it->is_array()) return out;
    for (const auto& e : *it) {
        if (!e.is_object() || !e.contains("test_accuracy") || !e["test_accuracy"].is_number()) continue;
        Evaluation ev{e["test_accuracy"].get<double>(), e.value("global_step", 0LL), std::nullopt};
        if (e.contains("elapsed_seconds") && e["elapsed_seconds"].is_number())
            ev.seconds = e["elapsed_seconds"].get<double>();
        out.push_back(ev);
    }
    return out;
}

// "99.0%: 95 s (global step 2500)" or "99.2%: not reached"; nullopt when the first evaluation
// at the threshold has no time.
std::string time_to(const std::vector<Evaluation>& evals, double threshold) {
    for (const Evaluation& e : evals) {
        if (e.accuracy + 1e-9 < threshold) continue;
        if (!e.seconds) return fmt::format("{:.1f}% at global step {} (no time recorded)", threshold * 100, e.step);
        return fmt::format("{:.1f}% in {:.0f} s (global step {})", threshold * 100, *e.seconds, e.step);
    }
    return fmt::format("{:.1f}% not reached", threshold * 100);
}

}  // namespace

std::vector<std::string> summary_lines(const nlohmann::json& summary, const std::string& model_dir,
                                       const ModelDirFiles& files) {
    std::vector<std::string> lines;
    const auto evals = evaluations_of(summary);
    lines.push_back(fmt::format("final test accuracy {:.2f}% at global step {}",
                                summary["test_accuracy"].get<double>() * 100, summary.value("global_step", 0LL)));
    if (!evals.empty()) {
        const Evaluation* best = &evals.front();
        for (const Evaluation& e : evals)
            if (e.accuracy > best->accuracy) best = &e;
        lines.push_back(fmt::format("best test accuracy {:.2f}% at global step {} ({} {})", best->accuracy * 100,
                                    best->step, evals.size(), evals.size() == 1 ? "evaluation" : "evaluations"));
        bool timed = false;
        for (const Evaluation& e : evals) timed = timed || e.seconds.has_value();
        const long long start = summary.value("start_step", 0LL);
        bool reached = false;
        for (const Evaluation& e : evals) reached = reached || e.accuracy + 1e-9 >= 0.99;
        if (!reached)
            lines.push_back("time to 99.0% and 99.2%: neither reached");
        else if (timed)
            lines.push_back(fmt::format("time to {}; {} (seconds since training {})", time_to(evals, 0.99),
                                        time_to(evals, 0.992),
                                        start > 0 ? fmt::format("resumed at global step {}", start) : "started"));
        else
            lines.push_back("time to 99.0%/99.2%: unknown, no evaluation record carries a time");
    } else {
        lines.push_back("no per-evaluation records: best accuracy and time to 99.0%/99.2% unknown");
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
            lines.push_back(fmt::format("restart: worker {} at {} (it {} at global step {})", e.value("worker", 0),
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

Result<std::vector<std::string>> read_run_summary(const std::string& model_dir) {
    namespace fs = std::filesystem;
    const std::string path = model_dir + "/summary.json";
    std::ifstream in(path);
    const auto j = nlohmann::json::parse(in, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("test_accuracy") || !j["test_accuracy"].is_number())
        return make_error(ErrorCode::kNotFound, fmt::format("no final test accuracy: {} is missing or unreadable", path));
    ModelDirFiles files;
    std::error_code ec;
    files.metrics = fs::exists(model_dir + "/metrics.jsonl", ec);
    files.curves = fs::exists(model_dir + "/curves.png", ec);
    for (fs::directory_iterator it(model_dir, ec), end; !ec && it != end; it.increment(ec))
        if (it->path().filename().string().rfind("events.out.tfevents.", 0) == 0) files.events = true;
    return summary_lines(j, model_dir, files);
}

}  // namespace psrun::launcher
