#include "psd/zero_pages.h"

#include <sys/mman.h>

#include <new>

namespace psrun::psd {

void* map_zero_pages(std::size_t bytes) {
    if (bytes == 0) return nullptr;
    void* p = ::mmap(nullptr, bytes, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) throw std::bad_alloc();
    ::madvise(p, bytes, MADV_HUGEPAGE);
    return p;
}

void unmap_zero_pages(void* p, std::size_t bytes) noexcept {
    if (p != nullptr) ::munmap(p, bytes);
}

}  // namespace psrun::psd
