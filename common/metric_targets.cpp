#include "common/metric_targets.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <cmath>

namespace psrun {
namespace {

constexpr double kEpsilon = 1e-9;  // accuracies are ratios of counts: compare with a little slack
constexpr std::size_t kMaxTargets = 8;

bool meets(double value, double threshold, const MetricSpec& metric) {
    return metric.higher_is_better ? value + kEpsilon >= threshold : value - kEpsilon <= threshold;
}

TargetTime first_at(const std::vector<MetricPoint>& points, double threshold, TargetKind kind,
                    const MetricSpec& metric) {
    TargetTime t{kind, threshold, false, 0, std::nullopt};
    for (const MetricPoint& p : points) {
        if (!meets(p.value, threshold, metric)) continue;
        t.reached = true;
        t.global_step = p.global_step;
        t.seconds = p.seconds;
        break;
    }
    return t;
}

std::string std_trimmed(std::string text) {
    // "99.20" -> "99.2", "99.00" -> "99.0"
    while (text.size() > 1 && text.back() == '0' && text[text.size() - 2] != '.') text.pop_back();
    return text;
}

// "in 70 s (global step 2500)", "not reached", "at global step 2500 (no time recorded)".
std::string when(const TargetTime& t) {
    if (!t.reached) return "not reached";
    if (!t.seconds) return fmt::format("at global step {} (no time recorded)", t.global_step);
    return fmt::format("in {:.0f} s (global step {})", *t.seconds, t.global_step);
}

std::string margin_words(const MetricSpec& metric) {
    if (!metric.percent) return format_threshold(metric.near_best_margin, metric);
    const double points = metric.near_best_margin * 100;
    return fmt::format("{:g} point{}", std::round(points * 100) / 100, std::fabs(points - 1) < kEpsilon ? "" : "s");
}

}  // namespace

MetricSpec accuracy_metric() { return MetricSpec{}; }

MetricSpec loss_metric() { return MetricSpec{"test_loss", "test loss", false, false, 0.01}; }

const char* to_string(TargetKind kind) {
    switch (kind) {
        case TargetKind::kGiven: return "given";
        case TargetKind::kDefault: return "default";
        case TargetKind::kBest: return "best";
        case TargetKind::kNearBest: return "near_best";
    }
    return "?";
}

std::string format_metric(double value, const MetricSpec& metric) {
    if (metric.percent) return fmt::format("{:.2f}%", value * 100);
    return fmt::format("{:.4g}", value);
}

std::string format_threshold(double value, const MetricSpec& metric) {
    if (metric.percent) return std_trimmed(fmt::format("{:.2f}", value * 100)) + "%";
    return fmt::format("{:.4g}", value);
}

TargetChoice choose_targets(const MetricSpec& metric, const std::vector<double>& given, const std::string& dataset) {
    if (!given.empty()) return {given, TargetKind::kGiven};
    if (metric.field == "test_accuracy" && dataset == "mnist") return {{0.99, 0.992}, TargetKind::kDefault};
    return {{}, TargetKind::kBest};
}

Result<std::vector<double>> parse_target_accuracy(std::string_view text) {
    auto bad = [&](const std::string& why) {
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("--target-accuracy '{}': {} (give one to {} accuracies separated by commas, as "
                                      "percentages such as 99.2 or fractions such as 0.992)",
                                      text, why, kMaxTargets));
    };
    std::vector<double> out;
    std::size_t start = 0;
    while (true) {
        const std::size_t comma = text.find(',', start);
        std::string_view item =
            text.substr(start, comma == std::string_view::npos ? std::string_view::npos : comma - start);
        while (!item.empty() && item.front() == ' ') item.remove_prefix(1);
        while (!item.empty() && item.back() == ' ') item.remove_suffix(1);
        const bool percent_sign = !item.empty() && item.back() == '%';
        if (percent_sign) item.remove_suffix(1);
        if (item.empty()) return bad("an empty value");
        double v = 0;
        const auto [end, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
        if (ec != std::errc() || end != item.data() + item.size() || !std::isfinite(v))
            return bad(fmt::format("'{}' is not a number", item));
        // 99.9 / 100 is 0.9990000000000001 in binary: round to 12 decimals, so that the
        // threshold reads back as given.
        if (percent_sign || v > 1) v = std::round(v / 100 * 1e12) / 1e12;
        if (!(v > 0 && v <= 1)) return bad(fmt::format("'{}' is outside (0, 100%]", item));
        out.push_back(v);
        if (out.size() > kMaxTargets) return bad("too many values");
        if (comma == std::string_view::npos) break;
        start = comma + 1;
    }
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end(), [](double a, double b) { return std::fabs(a - b) < kEpsilon; }),
              out.end());
    return out;
}

std::vector<TargetTime> time_to_targets(const std::vector<MetricPoint>& points, const MetricSpec& metric,
                                        const TargetChoice& choice) {
    std::vector<TargetTime> out;
    if (points.empty()) return out;
    if (!choice.thresholds.empty()) {
        for (double t : choice.thresholds) out.push_back(first_at(points, t, choice.kind, metric));
        return out;
    }
    double best = points.front().value;
    for (const MetricPoint& p : points)
        best = metric.higher_is_better ? std::max(best, p.value) : std::min(best, p.value);
    const double near = metric.higher_is_better ? best - metric.near_best_margin : best + metric.near_best_margin;
    out.push_back(first_at(points, best, TargetKind::kBest, metric));
    out.push_back(first_at(points, near, TargetKind::kNearBest, metric));
    return out;
}

std::string describe_targets(const std::vector<TargetTime>& times, const MetricSpec& metric, SecondsKind seconds,
                             std::int64_t start_step) {
    const std::string clock =
        seconds == SecondsKind::kTraining
            ? "seconds of training, evaluations excluded"
            : (start_step > 0 ? fmt::format("seconds since training resumed at global step {}", start_step)
                              : std::string("seconds since training started"));
    bool any_reached = false, any_timed = false;
    for (const TargetTime& t : times) {
        any_reached = any_reached || t.reached;
        any_timed = any_timed || (t.reached && t.seconds);
    }
    if (times.front().kind == TargetKind::kBest) {
        const TargetTime& best = times.front();
        std::string line = fmt::format("time to the best {} ({}) {}", metric.words,
                                       format_threshold(best.threshold, metric), when(best));
        if (times.size() > 1)
            line += fmt::format("; to within {} of it ({}) {}", margin_words(metric),
                                format_threshold(times[1].threshold, metric), when(times[1]));
        return line + fmt::format(" ({})", clock);
    }
    std::vector<std::string> names;
    for (const TargetTime& t : times) names.push_back(format_threshold(t.threshold, metric));
    if (!any_reached) {
        if (names.size() == 1) return fmt::format("time to {} {}: not reached", metric.words, names[0]);
        if (names.size() == 2)
            return fmt::format("time to {} and {} {}: neither reached", names[0], names[1], metric.words);
        return fmt::format("time to {} {}: none reached", fmt::join(names, ", "), metric.words);
    }
    if (!any_timed)
        return fmt::format("time to {}: unknown, no evaluation record carries a time", fmt::join(names, "/"));
    std::vector<std::string> parts;
    for (std::size_t i = 0; i < times.size(); ++i) parts.push_back(names[i] + " " + when(times[i]));
    return fmt::format("time to {} ({})", fmt::join(parts, "; "), clock);
}

nlohmann::json targets_to_json(const std::vector<TargetTime>& times, const MetricSpec& metric, SecondsKind seconds) {
    nlohmann::json list = nlohmann::json::array();
    for (const TargetTime& t : times) {
        nlohmann::json j = {{"kind", to_string(t.kind)}, {"threshold", t.threshold}, {"reached", t.reached}};
        if (t.reached) {
            j["global_step"] = t.global_step;
            if (t.seconds) j["seconds"] = *t.seconds;
        }
        list.push_back(std::move(j));
    }
    return {{"metric", {{"field", metric.field}, {"higher_is_better", metric.higher_is_better}}},
            {"seconds", seconds == SecondsKind::kTraining ? "training" : "elapsed"},
            {"targets", std::move(list)}};
}

std::vector<MetricPoint> points_from_summary(const nlohmann::json& summary, const MetricSpec& metric,
                                             SecondsKind& seconds) {
    std::vector<MetricPoint> out;
    seconds = SecondsKind::kElapsed;
    const auto it = summary.find("evaluations");
    if (it == summary.end() || !it->is_array()) return out;
    bool elapsed = false, training = false;
    for (const auto& e : *it) {
        if (!e.is_object() || !e.contains(metric.field) || !e[metric.field].is_number()) continue;
        MetricPoint p;
        p.value = e[metric.field].get<double>();
        if (e.contains("global_step") && e["global_step"].is_number_integer())
            p.global_step = e["global_step"].get<std::int64_t>();
        if (e.contains("elapsed_seconds") && e["elapsed_seconds"].is_number()) {
            p.seconds = e["elapsed_seconds"].get<double>();
            elapsed = true;
        } else if (e.contains("train_seconds") && e["train_seconds"].is_number()) {
            p.seconds = e["train_seconds"].get<double>();
            training = true;
        }
        out.push_back(p);
    }
    if (training && !elapsed) seconds = SecondsKind::kTraining;
    return out;
}

std::vector<double> given_targets_of(const nlohmann::json& summary) {
    std::vector<double> out;
    const auto it = summary.find("targets");
    if (it == summary.end() || !it->is_object() || !it->contains("targets") || !(*it)["targets"].is_array()) return out;
    for (const auto& t : (*it)["targets"])
        if (t.is_object() && t.value("kind", std::string()) == "given" && t.contains("threshold") &&
            t["threshold"].is_number())
            out.push_back(t["threshold"].get<double>());
    return out;
}

}  // namespace psrun
