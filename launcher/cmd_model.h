// `psrun model list`, `psrun model show NAME|FILE.json [--json]` and `psrun model check`
// (cmd_model_check.h; docs/models.md).
#pragma once

#include <CLI/CLI.hpp>

namespace psrun::launcher {

// Registers `model list`, `model show` and `model check` on `app`; their callbacks set exit_code (0 shown,
// 2 unknown model or a bad description, with the message on stderr).
void add_model_command(CLI::App& app, int& exit_code);

}  // namespace psrun::launcher
