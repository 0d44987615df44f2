// `psrun model check` (docs/models.md "Checking a network"): the whole-network gradient check
// of workerd/nn/gradient_check.h on one batch, from the command line.
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `check` under `model` (the `psrun model` subcommand); its callback sets exit_code:
// 0 every gradient within tolerance, 1 one is not, 2 a usage error (message on stderr).
void add_model_check_command(CLI::App& model, int& exit_code);

}  // namespace psrun::launcher
