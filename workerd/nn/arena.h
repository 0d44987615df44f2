// The bytes of the engine's planned buffers (buffer_plan.h): one range of address space reserved
// at once, so that every buffer has its final address when a kernel builds on it, before the
// plan knows how large the arena will be. Only what grow() made usable counts against memory
// (the rest is reserved address space, PROT_NONE), and only pages written take physical memory.
// Owns the mapping; not thread-safe.
#pragma once

#include <cstddef>

namespace psrun::nn {

class Arena {
  public:
    // Reserves `reserve` bytes of address space; valid() is false when the system refuses.
    explicit Arena(std::size_t reserve);
    ~Arena();
    Arena(const Arena&) = delete;
    Arena& operator=(const Arena&) = delete;

    bool valid() const { return base_ != nullptr; }
    std::size_t reserved() const { return reserved_; }
    // Makes [0, bytes) readable and writable. False when bytes > reserved() or the system refuses.
    bool grow(std::size_t bytes);
    char* base() const { return base_; }

  private:
    char* base_ = nullptr;
    std::size_t reserved_ = 0;
    std::size_t usable_ = 0;
};

}  // namespace psrun::nn
