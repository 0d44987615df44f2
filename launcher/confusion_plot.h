// confusion.png for `psrun eval`: the confusion matrix as a heat map drawn by gnuplot (as
// curves.png is, common/metrics_log.h), each cell coloured by its share of the true class and
// labelled with its count.
#pragma once

#include <string>

#include "common/result.h"
#include "workerd/classification_report.h"

namespace psrun::launcher {

// Writes `png_path` (and removes the temporary data file next to it). `title` heads the plot.
// Errors (kIo: gnuplot missing or failing, with its message) are returned, never thrown.
[[nodiscard]] Result<void> plot_confusion(const worker::ClassificationReport& report, const std::string& title,
                                          const std::string& png_path);

}  // namespace psrun::launcher
