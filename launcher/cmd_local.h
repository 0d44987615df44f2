// `psrun local`: the whole cluster on this host, every daemon a supervised child of psrun.
#pragma once

#include <CLI/CLI.hpp>

#include "launcher/command_context.h"

namespace psrun::launcher {

void add_local_command(CLI::App& app, CommandContext& ctx);

}  // namespace psrun::launcher
