// `psrun plan` (print the cluster map as this task sees it) and `psrun addr` (print
// "node=IPv4" of an interface, to build --node-addrs).
#pragma once

#include <CLI/CLI.hpp>

#include "launcher/command_context.h"

namespace psrun::launcher {

void add_plan_command(CLI::App& app, CommandContext& ctx);
void add_addr_command(CLI::App& app, CommandContext& ctx);

}  // namespace psrun::launcher
