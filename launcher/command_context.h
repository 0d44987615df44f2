// What main() hands to every psrun subcommand: the environment (read once, in main) and the
// arguments after "--" (training options for workerd).
#pragma once

#include <string>
#include <vector>

#include "launcher/env_map.h"

namespace psrun::launcher {

struct CommandContext {
    EnvMap env;
    std::vector<std::string> training;  // everything after the first "--"
    int exit_code = 0;                  // set by the subcommand's callback
};

}  // namespace psrun::launcher
