// `psrun run`: resolve this task's place in the cluster map and exec the right daemon.
#pragma once

#include <CLI/CLI.hpp>

#include "launcher/command_context.h"

namespace psrun::launcher {

void add_run_command(CLI::App& app, CommandContext& ctx);

}  // namespace psrun::launcher
