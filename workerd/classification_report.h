// What `psrun eval` reports for a classifier on a labelled test set: accuracy, the confusion
// matrix (rows: true class, columns: predicted class), and per class precision (of the images
// predicted as the class, the share that are), recall (of the images of the class, the share
// predicted as it) and support (images of the class). Plain values; no I/O but formatting.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace psrun::worker {

struct ClassificationReport {
    int classes = 0;
    std::int64_t total = 0;
    std::int64_t correct = 0;
    std::vector<std::vector<std::int64_t>> confusion;  // [true][predicted]
    std::vector<double> precision;                     // 0 for a class never predicted
    std::vector<double> recall;                        // 0 for a class with no images
    std::vector<std::int64_t> support;                 // row sums of confusion

    double accuracy() const { return total ? static_cast<double>(correct) / static_cast<double>(total) : 0.0; }
};

// REQUIRES: labels.size() == predicted.size(), every value in [0, classes) (else
// std::invalid_argument).
ClassificationReport make_report(std::span<const std::int32_t> labels, std::span<const std::int32_t> predicted,
                                 int classes);

// "class  precision  recall  support [name]" rows, one per class, then the macro averages;
// `names` (index = class) adds a column of class names.
std::string report_table(const ClassificationReport& report, std::span<const std::string> names = {});
// The matrix with a header row of predicted classes and a first column of true classes.
std::string confusion_text(const ClassificationReport& report);
// {"accuracy", "total", "correct", "classes", "confusion", "precision", "recall", "support"}.
nlohmann::json report_json(const ClassificationReport& report);

}  // namespace psrun::worker
