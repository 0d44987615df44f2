// libFuzzer target for Slurm hostlists: psrun's own syntax check, then libslurm's expansion.
// Contract checked: never a crash; expand_hostlist succeeds only where check_hostlist does, with
// exactly the announced number of distinct, well-formed host names. A disagreement between the
// check and libslurm ("libslurm expanded it to N hosts") is a finding: the check must reject
// what libslurm cannot expand, so that users get our precise message.
// Built and run by test/fuzz/fuzz.sh hostlist.
#include <cstddef>
#include <cstdint>
#include <set>
#include <string>
#include <string_view>

#include "launcher/hostlist.h"

namespace {
constexpr std::size_t kFuzzMaxHosts = 2048;
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun::launcher;
    const std::string_view list(reinterpret_cast<const char*>(data), size);
    const auto count = check_hostlist(list);
    // Expanding tens of thousands of hosts takes ~10 ms under ASan; the bounds are covered by
    // the unit tests, so the fuzzer spends its time on the syntax instead.
    if (count && *count > kFuzzMaxHosts) return 0;
    const auto hosts = expand_hostlist(list);
    if (hosts && !count) __builtin_trap();  // expansion without a passing check
    if (count && (*count == 0 || *count > kMaxHosts)) __builtin_trap();
    if (count && !hosts && hosts.error().message.find("appears twice") == std::string::npos)
        __builtin_trap();  // the check passed but libslurm disagreed
    if (hosts) {
        if (hosts->size() != *count) __builtin_trap();
        std::set<std::string> unique(hosts->begin(), hosts->end());
        if (unique.size() != hosts->size()) __builtin_trap();
        for (const std::string& h : *hosts)
            if (h.empty() || h.find_first_of(",[]") != std::string::npos) __builtin_trap();
    }
    return 0;
}
