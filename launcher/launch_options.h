// CLI11 registration of the options shared by `psrun plan`, `run` and `local`.
#pragma once

#include <CLI/CLI.hpp>

#include "launcher/daemon_command.h"
#include "launcher/map_builder.h"

namespace psrun::launcher {

// Map sources and role/address/port options (plan, run). `preview` adds --nodelist,
// --tasks-per-node, --procid, --job-id, --step-id.
void add_map_options(CLI::App* cmd, MapOptions& options, bool preview);

// Options forwarded to the daemons (run, local).
void add_daemon_options(CLI::App* cmd, DaemonOptions& options);

}  // namespace psrun::launcher
