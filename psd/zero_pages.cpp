#include "psd/zero_pages.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstdint>
#include <map>
#include <mutex>
#include <new>
#include <utility>
#include <vector>

#ifndef MADV_COLLAPSE
#define MADV_COLLAPSE 25  // Linux 6.1's value; glibc 2.36's headers do not name it
#endif

namespace psrun::psd {
namespace {

constexpr std::uintptr_t kHugePage = 2u << 20;

// Every zero-page mapping of the process: start -> bytes. The lock is held while one is mapped,
// unmapped or collapsed (2 MiB of it).
struct Mappings {
    std::mutex mutex;
    std::map<std::uintptr_t, std::size_t> live;
};
Mappings& mappings() {
    static Mappings m;
    return m;
}

void collapse_all(const std::stop_token& stop) {
    Mappings& m = mappings();
    std::vector<std::pair<std::uintptr_t, std::size_t>> ranges;
    {
        std::lock_guard lock(m.mutex);
        ranges.assign(m.live.begin(), m.live.end());
    }
    for (const auto& [start, bytes] : ranges) {
        const std::uintptr_t end = start + bytes;
        for (std::uintptr_t chunk = start & ~(kHugePage - 1); chunk < end && !stop.stop_requested();
             chunk += kHugePage) {
            const std::uintptr_t first = std::max(chunk, start), last = std::min(chunk + kHugePage, end);
            std::lock_guard lock(m.mutex);
            const auto it = m.live.find(start);
            if (it == m.live.end() || it->second != bytes) break;  // unmapped meanwhile
            // EINVAL for 2 MiB never written (left unbacked) or a kernel without MADV_COLLAPSE.
            ::madvise(reinterpret_cast<void*>(first), last - first, MADV_COLLAPSE);
        }
    }
}

}  // namespace

void* map_zero_pages(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    ::madvise(p, bytes, MADV_HUGEPAGE);
    std::lock_guard lock(mappings().mutex);
    mappings().live[reinterpret_cast<std::uintptr_t>(p)] = bytes;
    return p;
}

void unmap_zero_pages(void* p, std::size_t bytes) noexcept {
    if (p == nullptr) return;
    std::lock_guard lock(mappings().mutex);
    mappings().live.erase(reinterpret_cast<std::uintptr_t>(p));
    ::munmap(p, bytes);
}

void HugePageCollapser::start() {
    stop();
    thread_ = std::jthread([](std::stop_token stop) { collapse_all(stop); });
}

void HugePageCollapser::wait() {
    if (thread_.joinable()) thread_.join();
}

void HugePageCollapser::stop() {
    if (!thread_.joinable()) return;
    thread_.request_stop();
    thread_.join();
}

}  // namespace psrun::psd
