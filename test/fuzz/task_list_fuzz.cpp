// libFuzzer target for role assignment: the --tasks list ("ps,worker,chief,...") and
// --placement, checked against a step geometry, and place_ps for --ps N.
// Input: byte 0 = number of ps, bytes 1..k = tasks per node (each byte % 8 + 1, k = byte 1 % 8
// nodes), the rest = the --tasks text.
// Contract checked: never a crash; an accepted task list has one role per task, at most one
// chief and at least one worker; place_ps places exactly N ps, spread places at most one per
// node until every node has one.
// Built and run by test/fuzz/fuzz.sh task_list.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "launcher/role_assignment.h"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::launcher;
    if (size < 2) return 0;
    const int num_ps = static_cast<int>(static_cast<std::int8_t>(data[0])) % 64;
    const std::size_t nodes = data[1] % 8 + 1;
    if (size < 2 + nodes) return 0;
    std::vector<int> tasks_per_node;
    int total = 0;
    for (std::size_t n = 0; n < nodes; ++n) {
        tasks_per_node.push_back(data[2 + n] % 8 + 1);
        total += tasks_per_node.back();
    }
    const std::string_view text(reinterpret_cast<const char*>(data + 2 + nodes), size - 2 - nodes);

    if (const auto roles = parse_task_list(text)) {
        if (roles->empty()) __builtin_trap();
        if (check_task_list(*roles, static_cast<int>(roles->size()))) {
            const auto chiefs = std::count(roles->begin(), roles->end(), TaskRole::kChief);
            const auto workers = std::count(roles->begin(), roles->end(), TaskRole::kWorker);
            if (chiefs > 1 || chiefs + workers == 0) __builtin_trap();
        }
        if (check_task_list(*roles, total) && static_cast<int>(roles->size()) != total) __builtin_trap();
    }
    (void)parse_placement(text);

    for (Placement placement : {Placement::kSpread, Placement::kPack}) {
        const auto roles = place_ps(tasks_per_node, num_ps, placement);
        if (!roles) {
            if (num_ps >= 0 && num_ps < total) __builtin_trap();  // a valid request was refused
            continue;
        }
        if (static_cast<int>(roles->size()) != total) __builtin_trap();
        if (std::count(roles->begin(), roles->end(), TaskRole::kPs) != num_ps) __builtin_trap();
        if (placement == Placement::kSpread) {
            int per_node_max = 0, nodes_with_ps = 0;
            for (std::size_t n = 0; n < nodes; ++n) {
                int here = 0;
                for (int l = 0; l < tasks_per_node[n]; ++l)
                    here += (*roles)[static_cast<std::size_t>(slot_index(tasks_per_node, static_cast<int>(n), l))] ==
                            TaskRole::kPs;
                per_node_max = std::max(per_node_max, here);
                nodes_with_ps += here > 0;
            }
            if (per_node_max > 1 && nodes_with_ps < static_cast<int>(nodes)) __builtin_trap();
        }
    }
    return 0;
}
