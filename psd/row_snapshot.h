// A point-in-time image of one table's rows while the poll loop goes on changing them: copy on
// write in user space, by blocks of kBlockRows rows, so that a checkpoint is written by a thread
// of psd without a fork (psd/row_store.h begin_snapshot(); docs/sparse.md, "Checkpoints"). A
// forked writer costs the poll loop a page fault and a 4 KiB copy for every page it first writes
// while the child lives (~7 us each on a VM, tens of thousands in a step of a large table); here
// the first change of a block copies the block's rows once (16 rows: 2 KiB with Adagrad at
// width 16) and later changes cost one atomic load.
//
// The writer reads the table part by part (values, then each optimizer slot, then the moving
// average: the parts of the checkpoint file, in that order), each part block by block in order.
// Per block one atomic word says how many parts the writer has read, or where a saved copy of the
// block is. The poll loop calls before_change() before it writes any part of a block (or its
// metadata, e.g. a created bit): unless the writer has read every part, the parts it has not read
// yet (with `keep_all`: every part) and the metadata are copied to a record of this object's
// arena and the word is set to name it, then the loop changes the block. Neither side ever waits
// for the other (the writer runs at the lowest priority: a loop waiting for it could wait long):
// the writer copies a block it finds not saved straight from the table, then counts its part as
// read with a compare-and-swap of the word it found; if the loop saved the block meanwhile (the
// swap fails), the copy may be torn and is taken again from the record, which holds the block as
// it was (a seqlock's optimistic read). Records live until the object is destroyed: memory grows
// with the blocks changed during the write, as a fork's copies did.
//
// Threads: before_change() from one thread (the poll loop), read() from one other (the writer);
// the tables' owner destroys the object once the writer is done.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace psrun::psd {

class RowSnapshot {
  public:
    static constexpr std::uint64_t kBlockRows = 16;

    // `blocks` blocks of parts of part_bytes[p] bytes each (at most 7 parts: a whole block's rows
    // of one part), and `meta_bytes` of metadata per block. With `keep_all`, a saved block keeps
    // every part, also those the writer has already read (a later part needs the earlier ones as
    // they were: the moving average is computed from the values).
    RowSnapshot(std::uint64_t blocks, std::vector<std::size_t> part_bytes, std::size_t meta_bytes, bool keep_all);
    ~RowSnapshot();
    RowSnapshot(const RowSnapshot&) = delete;
    RowSnapshot& operator=(const RowSnapshot&) = delete;

    // Poll loop, before block `block` changes: when the writer still needs it, `save(first_part,
    // record)` copies the metadata to record[0, meta_bytes()) and parts [first_part, parts) after
    // it, part p at record + part_offset(first_part, p).
    template <class Save>
    void before_change(std::uint64_t block, Save&& save) {
        std::atomic<std::uint64_t>& word = states_[block];
        std::uint64_t s = word.load(std::memory_order_acquire);
        while (!saved(s) && done(s) < parts_) {
            const std::size_t first = keep_all_ ? 0 : done(s);
            const std::uint64_t offset = allocate(record_bytes(first));
            save(first, record(offset));
            if (word.compare_exchange_strong(s, (offset + 1) << kOffsetShift | done(s), std::memory_order_acq_rel))
                return;
            // The writer read a part meanwhile (s reloaded): that copy is left unused.
        }
    }

    // Writer: part `part` of block `block` as the snapshot has it. Calls `live()` to copy it from
    // the table (its rows and metadata as they are), and when the loop saved the block meanwhile
    // (that copy may be torn: discard it), `from(record, first_part)` with the block's saved copy
    // (as before_change() wrote it). REQUIRES: the parts before `part` of this block were read
    // before, and this part not yet.
    template <class Live, class From>
    void read(std::uint64_t block, std::size_t part, Live&& live, From&& from) {
        std::atomic<std::uint64_t>& word = states_[block];
        std::uint64_t s = word.load(std::memory_order_acquire);
        if (!saved(s)) {
            live();
            if (word.compare_exchange_strong(s, part + 1, std::memory_order_acq_rel)) return;
        }
        from(static_cast<const std::byte*>(record(offset(s))), keep_all_ ? std::size_t{0} : done(s));
    }

    // Before the writer starts: block `block` is not read (a differential checkpoint's writer
    // reads only the blocks changed since its base), so the loop never copies it.
    void skip(std::uint64_t block) { states_[block].store(parts_, std::memory_order_relaxed); }

    std::size_t meta_bytes() const { return meta_bytes_; }
    // Where part p lies in a record that holds parts from `first_part` on.
    std::size_t part_offset(std::size_t first_part, std::size_t p) const {
        return meta_bytes_ + offsets_[p] - offsets_[first_part];
    }
    // Bytes the saved copies take (the arena's chunks), for logs.
    std::uint64_t saved_bytes() const { return chunks_used_ * chunk_bytes_; }

  private:
    static constexpr unsigned kOffsetShift = 3;
    static std::size_t done(std::uint64_t s) { return s & 7; }
    static bool saved(std::uint64_t s) { return (s >> kOffsetShift) != 0; }
    static std::uint64_t offset(std::uint64_t s) { return (s >> kOffsetShift) - 1; }
    std::size_t record_bytes(std::size_t first_part) const { return part_offset(first_part, parts_); }
    // A record's place in the arena (a byte offset: chunk, then place in it); a new chunk when the
    // current one cannot hold `bytes` more. Poll loop only.
    std::uint64_t allocate(std::size_t bytes);
    std::byte* record(std::uint64_t offset) const;

    std::size_t parts_, meta_bytes_;
    std::vector<std::size_t> offsets_;  // offsets_[p]: the bytes of parts [0, p)
    bool keep_all_;
    std::unique_ptr<std::atomic<std::uint64_t>[]> states_;
    std::size_t chunk_bytes_;
    std::unique_ptr<std::atomic<std::byte*>[]> chunks_;  // as many as the worst case needs
    std::size_t max_chunks_ = 0;
    std::size_t chunks_used_ = 0;  // poll loop only
    std::uint64_t next_ = 0;       // the next free byte offset
};

}  // namespace psrun::psd
