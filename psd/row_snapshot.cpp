#include "psd/row_snapshot.h"

#include <sys/mman.h>

#include <algorithm>
#include <new>
#include <stdexcept>

namespace psrun::psd {
namespace {

// Chunks of the arena: mapped with their pages (MAP_POPULATE), so that the poll loop's copies
// into them take no page fault, one chunk at a time as copies fill them.
constexpr std::size_t kChunkBytes = std::size_t{8} << 20;

}  // namespace

RowSnapshot::RowSnapshot(std::uint64_t blocks, std::vector<std::size_t> part_bytes, std::size_t meta_bytes,
                         bool keep_all)
    : parts_(part_bytes.size()), meta_bytes_(meta_bytes), keep_all_(keep_all) {
    if (parts_ < 1 || parts_ > 7) throw std::invalid_argument("a row snapshot holds 1 to 7 parts");
    offsets_.assign(parts_ + 1, 0);
    for (std::size_t p = 0; p < parts_; ++p) offsets_[p + 1] = offsets_[p] + part_bytes[p];
    states_.reset(new std::atomic<std::uint64_t>[blocks]());  // every block: no part read yet
    const std::size_t largest = record_bytes(0);
    chunk_bytes_ = std::max(kChunkBytes, largest);
    const std::size_t per_chunk = chunk_bytes_ / largest;
    const std::size_t parts = parts_;
    // Worst case: every block saved once, and before that one copy per part left unused (the
    // writer took the block meanwhile).
    max_chunks_ = static_cast<std::size_t>(((parts + 1) * blocks + per_chunk - 1) / per_chunk) + 1;
    chunks_.reset(new std::atomic<std::byte*>[max_chunks_]());
}

RowSnapshot::~RowSnapshot() {
    for (std::size_t c = 0; c < chunks_used_; ++c) munmap(chunks_[c].load(std::memory_order_relaxed), chunk_bytes_);
}

std::uint64_t RowSnapshot::allocate(std::size_t bytes) {
    // A new chunk when the mapped ones cannot hold `bytes` more (also when the last is exactly full).
    if (next_ + bytes > std::uint64_t{chunks_used_} * chunk_bytes_) {
        if (chunks_used_ == max_chunks_) throw std::logic_error("row snapshot arena exhausted");
        void* p =
            mmap(nullptr, chunk_bytes_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_POPULATE, -1, 0);
        if (p == MAP_FAILED) throw std::bad_alloc();
        // Published before any state word names a record in it (the CAS that does is a release).
        chunks_[chunks_used_].store(static_cast<std::byte*>(p), std::memory_order_relaxed);
        next_ = std::uint64_t{chunks_used_} * chunk_bytes_;
        ++chunks_used_;
    }
    const std::uint64_t offset = next_;
    next_ += bytes;
    return offset;
}

std::byte* RowSnapshot::record(std::uint64_t offset) const {
    return chunks_[offset / chunk_bytes_].load(std::memory_order_relaxed) + offset % chunk_bytes_;
}

}  // namespace psrun::psd
