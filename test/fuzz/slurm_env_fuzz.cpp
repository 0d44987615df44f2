// libFuzzer target for a whole Slurm step environment: the input is NAME=VALUE lines (the
// SLURM_* variables psrun reads), parsed by SlurmEnv::parse, which combines the hostlist,
// tasks-per-node, port-list and number parsers and cross-checks them.
// Contract checked: never a crash; an accepted environment is self-consistent (one task count
// per node, the sum is the task count, procid/nodeid/localid in range).
// Built and run by test/fuzz/fuzz.sh slurm_env.
#include <cstddef>
#include <cstdint>
#include <numeric>
#include <string>
#include <string_view>

#include "launcher/slurm_env.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::launcher;
    std::string_view rest(reinterpret_cast<const char*>(data), size);
    EnvMap env;
    while (!rest.empty()) {
        const std::size_t nl = rest.find('\n');
        const std::string_view line = rest.substr(0, nl);
        rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
        const std::size_t eq = line.find('=');
        if (eq != std::string_view::npos) env[std::string(line.substr(0, eq))] = std::string(line.substr(eq + 1));
    }
    const auto step = SlurmEnv::parse(env);
    if (!step) return 0;
    if (step->nodes.empty() || step->nodes.size() != step->tasks_per_node.size()) __builtin_trap();
    if (std::accumulate(step->tasks_per_node.begin(), step->tasks_per_node.end(), 0L) != step->num_tasks)
        __builtin_trap();
    if (step->procid < 0 || step->procid >= step->num_tasks) __builtin_trap();
    if (step->nodeid < 0 || static_cast<std::size_t>(step->nodeid) >= step->nodes.size()) __builtin_trap();
    if (step->localid < 0 || step->localid >= step->tasks_per_node[static_cast<std::size_t>(step->nodeid)])
        __builtin_trap();
    return 0;
}
