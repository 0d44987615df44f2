// `psrun data fetch [--dataset mnist|fashion-mnist] [--data-dir D]`.
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `data fetch` on `app` (reusing a `data` subcommand if one exists); its callback
// sets exit_code (0 fetched or already present, 1 fetch failed, 2 bad option).
void add_data_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
