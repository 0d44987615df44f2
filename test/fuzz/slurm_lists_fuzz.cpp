// libFuzzer target for Slurm's compact number lists: SLURM_TASKS_PER_NODE ("2(x3),1") and
// SLURM_STEP_RESV_PORTS ("20001-20003,20005"). The first byte picks the parser.
// Contract checked: never a crash; accepted lists respect the documented bounds, and a tasks
// list re-compressed into Slurm's form parses back to the same counts.
// Built and run by test/fuzz/fuzz.sh slurm_lists.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "launcher/slurm_lists.h"

namespace {

std::string compress(const std::vector<int>& counts) {
    std::string out;
    for (std::size_t i = 0; i < counts.size();) {
        std::size_t j = i;
        while (j < counts.size() && counts[j] == counts[i]) ++j;
        if (!out.empty()) out += ',';
        out += std::to_string(counts[i]);
        if (j - i > 1) out += "(x" + std::to_string(j - i) + ")";
        i = j;
    }
    return out;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::launcher;
    if (size == 0) return 0;
    const std::string_view text(reinterpret_cast<const char*>(data + 1), size - 1);
    if (data[0] % 2 == 0) {
        const auto counts = parse_tasks_per_node(text);
        if (!counts) return 0;
        if (counts->empty()) __builtin_trap();
        long total = 0;
        for (int c : *counts) {
            if (c < 1) __builtin_trap();
            total += c;
        }
        if (total > kMaxTasksPerList) __builtin_trap();
        const auto again = parse_tasks_per_node(compress(*counts));
        if (!again || *again != *counts) __builtin_trap();
    } else {
        const auto ports = parse_port_list(text);
        if (!ports) return 0;
        if (ports->empty()) __builtin_trap();
        std::set<int> seen;
        for (int p : *ports)
            if (p < 1 || p > 65535 || !seen.insert(p).second) __builtin_trap();
    }
    return 0;
}
