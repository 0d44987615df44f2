// Running gnuplot (a Debian package jobs/setup.sh installs) on a script that draws a PNG: the
// plots of metrics_log.h (curves.png) and of `psrun eval` (confusion.png). Thread-safe; blocks
// until gnuplot exits.
#pragma once

#include <string>

#include "common/result.h"

namespace psrun {

// Pipes `script` into `gnuplot` and waits for it. Success: what gnuplot wrote to stderr
// (warnings; usually empty). Errors (kIo): no pipe, gnuplot missing or exiting non-zero, naming
// `png_path` and gnuplot's own message. `png_path` is only used in messages and, with ".gnuplot.log"
// appended, for the stderr capture (removed before returning).
[[nodiscard]] Result<std::string> run_gnuplot(const std::string& script, const std::string& png_path);

// A gnuplot single-quoted string's body: a quote is written twice.
std::string gnuplot_quoted(const std::string& text);

}  // namespace psrun
