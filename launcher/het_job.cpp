#include "launcher/het_job.h"

#include <fmt/format.h>

#include <algorithm>
#include <charconv>
#include <numeric>

#include "launcher/hostlist.h"

namespace psrun::launcher {
namespace {

constexpr int kMaxHetGroups = 64;

Result<int> parse_count(const EnvMap& env, const std::string& name, int low, int high) {
    const auto text = env_get(env, name);
    if (!text) return make_error(ErrorCode::kInvalidArgument, name + " is unset in a heterogeneous job");
    int value = 0;
    const auto [end, ec] = std::from_chars(text->data(), text->data() + text->size(), value);
    if (ec != std::errc() || end != text->data() + text->size() || value < low || value > high)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("{}='{}': expected an integer in {}..{}", name, *text, low, high));
    return value;
}

}  // namespace

Result<std::optional<HetGroups>> parse_het_groups(const EnvMap& env) {
    if (!env_get(env, "SLURM_HET_SIZE")) return std::optional<HetGroups>{};
    PSRUN_TRY_ASSIGN(auto size, parse_count(env, "SLURM_HET_SIZE", 1, kMaxHetGroups));
    HetGroups groups;
    for (int i = 0; i < size; ++i) {
        const std::string list_name = fmt::format("SLURM_JOB_NODELIST_HET_GROUP_{}", i);
        const auto list = env_get(env, list_name);
        if (!list)
            return make_error(ErrorCode::kInvalidArgument,
                              list_name + " is unset although SLURM_HET_SIZE=" + std::to_string(size));
        auto nodes = expand_hostlist(*list);
        if (!nodes || nodes->empty())
            return make_error(ErrorCode::kInvalidArgument,
                              fmt::format("{}='{}': {}", list_name, *list, nodes ? "empty" : nodes.error().message));
        PSRUN_TRY_ASSIGN(auto tasks, parse_count(env, fmt::format("SLURM_NTASKS_HET_GROUP_{}", i), 1, 1 << 20));
        groups.nodes.push_back(std::move(*nodes));
        groups.num_tasks.push_back(tasks);
    }
    return std::optional<HetGroups>{std::move(groups)};
}

Result<std::optional<std::vector<TaskRole>>> het_roles(const HetGroups& groups, const std::vector<std::string>& nodes,
                                                       const std::vector<int>& tasks_per_node) {
    const int total = std::accumulate(groups.num_tasks.begin(), groups.num_tasks.end(), 0);
    const int step_tasks = std::accumulate(tasks_per_node.begin(), tasks_per_node.end(), 0);
    if (groups.nodes.size() < 2 || step_tasks != total) return std::optional<std::vector<TaskRole>>{};
    const auto in_group = [&](std::size_t g, const std::string& node) {
        return std::find(groups.nodes[g].begin(), groups.nodes[g].end(), node) != groups.nodes[g].end();
    };
    std::vector<TaskRole> roles;
    for (std::size_t n = 0; n < nodes.size(); ++n) {
        const std::string& node = nodes[n];
        const bool ps = in_group(0, node);
        for (std::size_t g = 1; g < groups.nodes.size(); ++g) {
            if (ps && in_group(g, node))
                return make_error(ErrorCode::kInvalidArgument,
                                  fmt::format("node {} is in het-job components 0 and {}: psrun cannot tell "
                                              "which of its tasks run psd; give the roles with --tasks",
                                              node, g));
        }
        roles.insert(roles.end(), tasks_per_node[n], ps ? TaskRole::kPs : TaskRole::kWorker);
    }
    if (std::find(roles.begin(), roles.end(), TaskRole::kWorker) == roles.end())
        return make_error(ErrorCode::kInvalidArgument,
                          "every task of the het-job step is in component 0 (psd): "
                          "no worker is left");
    return std::optional<std::vector<TaskRole>>{std::move(roles)};
}

}  // namespace psrun::launcher
