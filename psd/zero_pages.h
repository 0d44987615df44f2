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
#include <thread>
#include <type_traits>

namespace psrun::psd {

// `bytes` of zero pages (nullptr for 0); std::bad_alloc when the address space is refused. The
// process keeps a list of its zero-page mappings (for HugePageCollapser), guarded by a lock.
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

// Huge pages back for every zero-page array of this process. While a forked child shares them
// (psd/forked_task.h), each 2 MiB page this process writes is split into 4 KiB pages (since Linux
// 5.8 a copy-on-write copies 4 KiB) and stays split once the child is gone, so random row updates
// miss the TLB from then on (measured on a 2 GiB array, this 2-vCPU VM: 64 ns a random write
// before the fork, 2.9 us after the child exited, 72 ns after a collapse). start() asks the kernel
// to make them huge again (MADV_COLLAPSE, Linux >= 6.1; elsewhere the calls fail and change
// nothing), 2 MiB at a time in a thread of its own while the owner goes on using the arrays: an
// array unmapped meanwhile is skipped (unmapping waits for the 2 MiB in progress). Regions never
// written stay unbacked. Call stop() before fork(): the child must find no lock held. Not
// thread-safe itself: one owner calls start(), wait() and stop().
class HugePageCollapser {
  public:
    HugePageCollapser() = default;
    ~HugePageCollapser() { stop(); }
    HugePageCollapser(const HugePageCollapser&) = delete;
    HugePageCollapser& operator=(const HugePageCollapser&) = delete;

    // Collapses every zero-page mapping there is now (a run in progress is stopped first).
    void start();
    // Waits until the run has gone through every mapping.
    void wait();
    // Ends the run early (after the 2 MiB in progress) and joins its thread.
    void stop();

  private:
    std::jthread thread_;
};

}  // namespace psrun::psd
