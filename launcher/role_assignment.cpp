#include "launcher/role_assignment.h"

#include <fmt/format.h>

#include <algorithm>
#include <string>

namespace psrun::launcher {

Result<std::vector<TaskRole>> parse_task_list(std::string_view text) {
    std::vector<TaskRole> roles;
    size_t pos = 0;
    while (true) {
        const size_t comma = text.find(',', pos);
        const std::string_view item = text.substr(pos, comma == std::string_view::npos ? comma : comma - pos);
        if (item == "ps") {
            roles.push_back(TaskRole::kPs);
        } else if (item == "worker") {
            roles.push_back(TaskRole::kWorker);
        } else if (item == "chief") {
            roles.push_back(TaskRole::kChief);
        } else if (item == "evaluator") {
            roles.push_back(TaskRole::kEvaluator);
        } else {
            return make_error(ErrorCode::kInvalidArgument,
                              fmt::format("--tasks: element {} is '{}', expected one of ps, "
                                          "worker, chief, evaluator",
                                          roles.size(), item));
        }
        if (comma == std::string_view::npos) break;
        pos = comma + 1;
    }
    return roles;
}

Result<Placement> parse_placement(std::string_view text) {
    if (text == "spread") return Placement::kSpread;
    if (text == "pack") return Placement::kPack;
    return make_error(ErrorCode::kInvalidArgument, fmt::format("--placement '{}': expected spread or pack", text));
}

int slot_index(const std::vector<int>& tasks_per_node, int node, int local_id) {
    int k = 0;
    for (int n = 0; n < node; ++n) k += tasks_per_node[static_cast<size_t>(n)];
    return k + local_id;
}

Result<std::vector<TaskRole>> place_ps(const std::vector<int>& tasks_per_node, int num_ps, Placement placement) {
    int total = 0;
    for (int c : tasks_per_node) total += c;
    if (num_ps < 0) return make_error(ErrorCode::kInvalidArgument, fmt::format("--ps {} is negative", num_ps));
    if (num_ps >= total)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("--ps {} leaves no worker among the step's {} tasks: use "
                                      "fewer ps or more tasks",
                                      num_ps, total));
    std::vector<TaskRole> roles(static_cast<size_t>(total), TaskRole::kWorker);
    if (placement == Placement::kPack) {
        std::fill_n(roles.begin(), num_ps, TaskRole::kPs);
        return roles;
    }
    const int max_local = *std::max_element(tasks_per_node.begin(), tasks_per_node.end());
    int placed = 0;
    for (int local = 0; local < max_local && placed < num_ps; ++local) {
        for (size_t node = 0; node < tasks_per_node.size() && placed < num_ps; ++node) {
            if (local >= tasks_per_node[node]) continue;
            roles[static_cast<size_t>(slot_index(tasks_per_node, static_cast<int>(node), local))] = TaskRole::kPs;
            ++placed;
        }
    }
    return roles;
}

Result<void> check_task_list(const std::vector<TaskRole>& roles, int num_tasks) {
    if (static_cast<int>(roles.size()) != num_tasks)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("--tasks has {} elements but the step has {} tasks: give "
                                      "exactly one role per task",
                                      roles.size(), num_tasks));
    const auto chiefs = std::count(roles.begin(), roles.end(), TaskRole::kChief);
    if (chiefs > 1)
        return make_error(ErrorCode::kInvalidArgument,
                          fmt::format("--tasks names {} chiefs; at most one is allowed", chiefs));
    if (chiefs == 0 && std::count(roles.begin(), roles.end(), TaskRole::kWorker) == 0)
        return make_error(ErrorCode::kInvalidArgument,
                          "--tasks has no worker or chief: training needs at least one worker");
    return {};
}

}  // namespace psrun::launcher
