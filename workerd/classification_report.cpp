#include "workerd/classification_report.h"

#include <fmt/format.h>

#include <algorithm>
#include <stdexcept>

namespace psrun::worker {

ClassificationReport make_report(std::span<const std::int32_t> labels, std::span<const std::int32_t> predicted,
                                 int classes) {
    if (labels.size() != predicted.size() || classes < 1)
        throw std::invalid_argument("make_report: " + std::to_string(labels.size()) + " labels, " +
                                    std::to_string(predicted.size()) + " predictions");
    ClassificationReport r;
    r.classes = classes;
    const auto z = static_cast<std::size_t>(classes);
    r.confusion.assign(z, std::vector<std::int64_t>(z, 0));
    for (std::size_t i = 0; i < labels.size(); ++i) {
        if (labels[i] < 0 || labels[i] >= classes || predicted[i] < 0 || predicted[i] >= classes)
            throw std::invalid_argument("make_report: class outside [0, " + std::to_string(classes) + ") at " +
                                        std::to_string(i));
        ++r.confusion[static_cast<std::size_t>(labels[i])][static_cast<std::size_t>(predicted[i])];
    }
    r.total = static_cast<std::int64_t>(labels.size());
    r.precision.assign(z, 0.0);
    r.recall.assign(z, 0.0);
    r.support.assign(z, 0);
    for (std::size_t c = 0; c < z; ++c) {
        std::int64_t predicted_as = 0;
        for (std::size_t k = 0; k < z; ++k) {
            r.support[c] += r.confusion[c][k];
            predicted_as += r.confusion[k][c];
        }
        const std::int64_t hits = r.confusion[c][c];
        r.correct += hits;
        r.precision[c] = predicted_as ? static_cast<double>(hits) / static_cast<double>(predicted_as) : 0.0;
        r.recall[c] = r.support[c] ? static_cast<double>(hits) / static_cast<double>(r.support[c]) : 0.0;
    }
    return r;
}

std::string report_table(const ClassificationReport& r, std::span<const std::string> names) {
    std::string out = fmt::format("{:>5}  {:>9}  {:>7}  {:>7}{}\n", "class", "precision", "recall", "support",
                                  names.empty() ? "" : "  name");
    double p = 0, q = 0;
    for (int c = 0; c < r.classes; ++c) {
        const auto i = static_cast<std::size_t>(c);
        out += fmt::format("{:>5}  {:>8.2f}%  {:>6.2f}%  {:>7}{}\n", c, 100 * r.precision[i], 100 * r.recall[i],
                           r.support[i], i < names.size() ? "  " + names[i] : std::string());
        p += r.precision[i];
        q += r.recall[i];
    }
    out +=
        fmt::format("{:>5}  {:>8.2f}%  {:>6.2f}%  {:>7}\n", "mean", 100 * p / r.classes, 100 * q / r.classes, r.total);
    return out;
}

std::string confusion_text(const ClassificationReport& r) {
    // Wide enough for the largest count and the column header.
    std::int64_t largest = 0;
    for (const auto& row : r.confusion)
        for (auto v : row) largest = std::max(largest, v);
    const std::size_t w =
        std::max<std::size_t>(fmt::format("{}", largest).size(), fmt::format("{}", r.classes - 1).size()) + 1;
    std::string out = fmt::format("{:>10}", "true\\pred");
    for (int c = 0; c < r.classes; ++c) out += fmt::format("{:>{}}", c, w);
    out += "\n";
    for (int t = 0; t < r.classes; ++t) {
        out += fmt::format("{:>10}", t);
        for (auto v : r.confusion[static_cast<std::size_t>(t)]) out += fmt::format("{:>{}}", v, w);
        out += "\n";
    }
    return out;
}

nlohmann::json report_json(const ClassificationReport& r) {
    return {{"accuracy", r.accuracy()}, {"total", r.total},         {"correct", r.correct}, {"classes", r.classes},
            {"confusion", r.confusion}, {"precision", r.precision}, {"recall", r.recall},   {"support", r.support}};
}

}  // namespace psrun::worker
