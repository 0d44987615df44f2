// `psrun model list` and `psrun model show NAME|FILE.json [--json]` (docs/models.md).
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `model list` and `model show` on `app`; their callbacks set exit_code (0 shown,
// 2 unknown model or a bad description, with the message on stderr).
void add_model_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
