#include "workerd/nn/arena.h"

#include <sys/mman.h>

namespace psrun::nn {

namespace {

constexpr std::size_t kGrain = std::size_t{1} << 21;  // grow in 2 MiB steps

}  // namespace

Arena::Arena(std::size_t reserve) {
    void* p = mmap(nullptr, reserve, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
    if (p == MAP_FAILED) return;
    base_ = static_cast<char*>(p);
    reserved_ = reserve;
}

Arena::~Arena() {
    if (base_ != nullptr) munmap(base_, reserved_);
}

bool Arena::grow(std::size_t bytes) {
    if (base_ == nullptr || bytes > reserved_) return false;
    if (bytes <= usable_) return true;
    std::size_t want = (bytes + kGrain - 1) / kGrain * kGrain;
    if (want > reserved_) want = reserved_;
    if (mprotect(base_ + usable_, want - usable_, PROT_READ | PROT_WRITE) != 0) return false;
    usable_ = want;
    return true;
}

}  // namespace psrun::nn
