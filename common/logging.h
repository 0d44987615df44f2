// Process-wide logging setup. Every daemon logs through spdlog's default logger with a
// "[component:index]" prefix so that interleaved srun output stays readable.
#pragma once

#include <string>

namespace psrun {

// Installs a stderr logger with the pattern "HH:MM:SS.mmm level [component:index] msg".
// index < 0 omits the index. SPDLOG_LEVEL in the environment overrides `level`
// ("trace", "debug", "info", "warn", "error"). Call once, early in main(), before threads start.
void init_logging(const std::string& component, int index = -1, const std::string& level = "info");

}  // namespace psrun
