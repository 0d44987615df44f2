// Training metrics as JSON lines (<model-dir>/metrics.jsonl: one object per record, with at
// least "step" and "time") and their plot (curves.png: loss and accuracy against step, drawn
// by gnuplot from the same file).
#pragma once

#include <cstdint>
#include <cstdio>
#include <string>

#include <nlohmann/json.hpp>

#include "common/result.h"

namespace psrun {

class MetricsLog {
  public:
    // Opens `path` for appending (a resumed run continues the same file). Throws
    // std::runtime_error when the file cannot be opened. Not thread-safe.
    explicit MetricsLog(const std::string& path);
    ~MetricsLog();
    MetricsLog(const MetricsLog&) = delete;
    MetricsLog& operator=(const MetricsLog&) = delete;

    // Appends `record` (an object) with "step" and wall-clock "time" (seconds since the epoch)
    // added, as one write(2). A record the disk has no room for (ENOSPC, EIO) is dropped whole
    // (a partial line is cut off again), logged on the first loss and at powers of two, and the
    // next records are tried as usual: metrics flow again as soon as there is room.
    void write(std::int64_t step, nlohmann::json record);
    const std::string& path() const { return path_; }
    std::uint64_t dropped() const { return dropped_; }  // records lost so far

  private:
    std::string path_;
    int fd_ = -1;
    std::uint64_t dropped_ = 0;
    bool dropping_ = false;  // the last record was lost
};

// Draws loss (left axis, log scale when every loss is positive) and test accuracy (right axis,
// the best one marked and labelled) against step from a metrics.jsonl into a PNG with gnuplot.
// Records without "loss" or "test_accuracy" are skipped; a single or flat series gets a range
// around its value. gnuplot's own messages go to `*messages` when given, else to the log as a
// warning. Errors (gnuplot missing, no data) are returned, never thrown: a plot must not fail
// a training run.
[[nodiscard]] Result<void> plot_curves(const std::string& metrics_path, const std::string& png_path,
                                       std::string* messages = nullptr);

}  // namespace psrun
