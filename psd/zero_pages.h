// An array of n trivially copyable values on anonymous zero pages: the whole array is reserved
// address space (MAP_NORESERVE), but memory is taken only for the pages written, and a value never
// written reads as zero (all bytes 0). Huge pages where the kernel has them: tables are touched at
// random, and 4 KiB pages cost a fault per new row per array and a TLB miss per update (measured:
// over half of psd's time on a 50M-row table); RSS then grows by 2 MiB steps. The array never
// moves: data() is the same from construction to destruction (moves hand the mapping over).
// Not thread-safe beyond what plain memory is.
#pragma once

#include <cstddef>
#include <span>
#include <type_traits>

namespace psrun::psd {

// `bytes` of zero pages (nullptr for 0); std::bad_alloc when the address space is refused.
void* map_zero_pages(std::size_t bytes);
void unmap_zero_pages(void* p, std::size_t bytes) noexcept;

template <class T>
class ZeroPages {
    static_assert(std::is_trivially_copyable_v<T>, "zero pages hold plain values");

  public:
    ZeroPages() = default;
    explicit ZeroPages(std::size_t n) : data_(static_cast<T*>(map_zero_pages(n * sizeof(T)))), size_(n) {}
    ~ZeroPages() { unmap_zero_pages(data_, size_ * sizeof(T)); }
    ZeroPages(ZeroPages&& other) noexcept : data_(other.data_), size_(other.size_) {
        other.data_ = nullptr;
        other.size_ = 0;
    }
    ZeroPages& operator=(ZeroPages&& other) noexcept {
        if (this != &other) {
            unmap_zero_pages(data_, size_ * sizeof(T));
            data_ = other.data_;
            size_ = other.size_;
            other.data_ = nullptr;
            other.size_ = 0;
        }
        return *this;
    }
    T* data() const { return data_; }
    std::size_t size() const { return size_; }
    bool empty() const { return size_ == 0; }
    T& operator[](std::size_t i) const { return data_[i]; }
    operator std::span<T>() const { return {data_, size_}; }

  private:
    T* data_ = nullptr;
    std::size_t size_ = 0;
};

}  // namespace psrun::psd
