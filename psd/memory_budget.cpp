#include "psd/memory_budget.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <sstream>
#include <string>

#include <fmt/format.h>

#include "common/text_file.h"

namespace psrun::psd {
namespace {

// A limit file's value: bytes, or 0 for "max" and anything unreadable.
std::uint64_t read_limit(const std::string& path) {
    const std::string text = read_text_file(path);
    if (text.empty() || text.starts_with("max")) return 0;
    return std::strtoull(text.c_str(), nullptr, 10);
}

// This process's memory cgroup limit in bytes, 0 when none is found.
std::uint64_t cgroup_limit() {
    std::istringstream lines(read_text_file("/proc/self/cgroup"));
    std::string line;
    std::uint64_t limit = 0;
    auto take = [&](std::uint64_t l) {
        if (l != 0) limit = limit == 0 ? l : std::min(limit, l);
    };
    while (std::getline(lines, line)) {  // "hierarchy-id:controllers:path"
        const auto a = line.find(':'), b = line.find(':', a + 1);
        if (a == std::string::npos || b == std::string::npos) continue;
        const std::string controllers = line.substr(a + 1, b - a - 1), path = line.substr(b + 1);
        if (controllers.empty()) take(read_limit("/sys/fs/cgroup" + path + "/memory.max"));  // v2
        std::istringstream names(controllers);
        for (std::string c; std::getline(names, c, ',');)
            if (c == "memory") take(read_limit("/sys/fs/cgroup/memory" + path + "/memory.limit_in_bytes"));  // v1
    }
    return limit;
}

std::string gib(std::uint64_t bytes) { return fmt::format("{:.1f} GiB", static_cast<double>(bytes) / (1ull << 30)); }

}  // namespace

std::uint64_t host_memory_bytes() {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    std::uint64_t bytes = pages > 0 && page > 0 ? static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page)
                                                : std::uint64_t{1} << 34;  // unknown: assume 16 GiB
    if (const auto cgroup = cgroup_limit(); cgroup != 0) bytes = std::min(bytes, cgroup);
    return std::max<std::uint64_t>(bytes, 1);
}

Result<void> check_shard_memory(const ShardLayout& layout, std::uint32_t shard, std::uint64_t budget) {
    std::uint64_t floats = 0;
    for (const auto id : layout.slices_of(shard)) floats += layout.slices[id].length;
    std::uint64_t bitmaps = 0;
    for (const auto& t : layout.tables) bitmaps += (t.rows_on(shard, layout.num_shards) + 63) / 64 * 8;
    // No overflow: a HELLO bounds tensors (wire::kMaxTensors of at most wire::kMaxRowsElements floats each).
    const std::uint64_t need = floats * sizeof(float) * 2 + bitmaps;
    if (need <= budget) return {};
    return make_error(ErrorCode::kInvalidArgument,
                      fmt::format("this psd (shard {} of {}) would hold {} floats of parameters and {} of row "
                                  "bitmaps, needing at least {} (the parameters twice), but this host lets it use {}: "
                                  "use more psd shards (--ps), a host with more memory, or a smaller model",
                                  shard, layout.num_shards, floats, gib(bitmaps), gib(need), gib(budget)));
}

}  // namespace psrun::psd
