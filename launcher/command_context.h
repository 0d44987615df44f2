// What main() hands to every psrun subcommand: the environment and the affinity mask's size
// (both read once, in main, so tests can inject them) and the arguments after "--" (training
// options for workerd).
#pragma once

#include <string>
#include <vector>

#include "launcher/env_map.h"

namespace psrun::launcher {

struct CommandContext {
    EnvMap env;
    std::vector<std::string> training;  // everything after the first "--"
    int affinity_cpus = 0;              // CPUs in psrun's affinity mask, read once in main (0: unknown)
    int exit_code = 0;                  // set by the subcommand's callback
};

}  // namespace psrun::launcher
