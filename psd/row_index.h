// The index of one table keyed by raw 64-bit ids (no vocabulary; docs/sparse.md "Raw ids"): which
// ids are rows of this shard, at which slot of a fixed-capacity row array, and the policy that
// admits new ids and evicts old rows. No row values here: the caller keeps each slot's values and
// optimizer slots, initialises a slot when occur() reports it created, and calls updated() when a
// push changed a row.
//
// Admission: an id becomes a row at its `admit_after`-th occurrence (counted in a count-min sketch
// of fixed size, so a collision may admit an id early, never late), and then with probability
// `admit_probability` per occurrence (a hash of the seed, the id and a call counter: the same calls
// give the same decisions). Until then the id reads as its initial values and its gradients are
// dropped (Monolith's and TFRA's filters). Eviction: at most `capacity` rows; admitting an id into a
// full index evicts the least recently updated row (LRU by update, a new row counting as updated
// at its admission); with `evict_after` T > 0, sweep(step) evicts every row not updated in the last
// T updates (T <= kMaxEvictAfter, 2^31). Rows are ordered by last update, so both cost O(rows
// evicted). A last update is kept to 2^31 updates before the newest: an older one reads as that.
//
// A full index admits by frequency (`frequency_gate`, TinyLFU's policy): from the first time it is
// full, every occurrence is counted in a second, ageing sketch, and a new id takes the least
// recently updated row's slot only when it occurred more often than that row's id; otherwise it is
// refused (counted in `refused_full`) and the row stays. So a table at its budget keeps its hot ids
// instead of cycling the tail through its slots (plain LRU, with the gate off, does that under
// Zipf traffic).
//
// Memory: 20 bytes per slot ever used (the slot's id, last update and neighbours in update order,
// on zero pages reserved for the capacity) plus the id -> slot map, a set of 4-byte slot numbers
// hashed by the slot's id (absl's flat_hash_set: 5 bytes per bucket, 7/16 to 7/8 of them full, so
// 6 to 11 bytes per row); no id is stored twice. Plus the admission sketch (4 x width bytes, width
// a power of two from 4 x capacity, 2^10 to 2^22) when admit_after > 1, and the gate's sketch (4 x
// width bytes, width from capacity, 2^10 to 2^22) once full. Not thread-safe: owned by psd's
// poll-loop thread, as the rows it indexes.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include <absl/container/flat_hash_set.h>

#include "common/tensor_layout.h"
#include "psd/count_sketch.h"
#include "psd/zero_pages.h"

namespace psrun::psd {

class RowIndex {
  public:
    struct Policy {
        std::uint64_t capacity = 0;      // rows at most (>= 1, < 2^32)
        std::uint32_t admit_after = 1;   // occurrences before an id becomes a row (1: the first)
        double admit_probability = 1.0;  // (0, 1]: the chance per occurrence, once counted enough
        std::uint64_t evict_after = 0;   // updates without a push before sweep() evicts (0: never; <= 2^31)
        std::uint64_t seed = 0;
        bool frequency_gate = true;  // a full index admits an id only when more frequent than its victim
    };
    struct Counters {
        std::uint64_t admitted = 0;      // ids made rows
        std::uint64_t refused = 0;       // occurrences of ids not (yet) admitted
        std::uint64_t evicted_full = 0;  // rows evicted to make room
        std::uint64_t evicted_idle = 0;  // rows evicted by sweep()
        std::uint64_t refused_full = 0;  // occurrences refused by a full index's frequency gate
    };
    struct Occurrence {
        std::uint32_t slot = kNone;            // the id's slot, or kNone: not a row
        bool created = false;                  // the slot was given to the id now: initialise it
        std::optional<std::uint64_t> evicted;  // the id whose row the slot held before
    };
    struct Entry {  // a row, for checkpoints
        std::uint64_t id = 0;
        std::uint32_t slot = 0;
        std::uint64_t last_update = 0;
        bool operator==(const Entry&) const = default;
    };
    static constexpr std::uint32_t kNone = 0xFFFFFFFFu;

    // std::invalid_argument naming the field when `policy` is out of range.
    explicit RowIndex(const Policy& policy);

    // The slot of `id`, or kNone. Counts nothing, reorders nothing.
    std::uint32_t find(std::uint64_t id) const;
    // An occurrence of `id` (a pull or a push) at update `step`: its slot, admitting it when the
    // policy says so now (evicting the least recently updated row when full), or kNone.
    Occurrence occur(std::uint64_t id, std::uint64_t step);
    // The row at `slot` was updated at `step` (>= every earlier step given): it becomes the most
    // recently updated.
    void updated(std::uint32_t slot, std::uint64_t step);
    // Evicts the rows whose last update is more than evict_after updates before `step` (none when
    // evict_after is 0); returns their (id, slot) pairs, oldest first.
    std::vector<Entry> sweep(std::uint64_t step);

    std::uint64_t rows() const { return map_.size(); }
    // Bytes of the index (the slots ever used, the map, the sketches, the free list).
    std::uint64_t bytes() const;
    std::uint64_t capacity() const { return policy_.capacity; }
    const Counters& counters() const { return counters_; }
    const Policy& policy() const { return policy_; }

    // The gate's sketch, once the index has been full (null before, and with the gate off).
    const CountSketch* gate() const { return gate_ ? &*gate_ : nullptr; }

    // Every row, least recently updated first (checkpoints).
    std::vector<Entry> entries() const;
    // Slots [0, used()) have held a row (the others never did). A slot's id and last update as
    // they are (meaningful while it holds a row).
    std::uint64_t used() const { return used_; }
    Entry entry_at(std::uint32_t slot) const {
        return {.id = slots_[slot].id(), .slot = slot, .last_update = last_update(slot)};
    }
    // `hook(context, slot)` is called before a slot's id or last update changes (an admission, an
    // update, every row at a rebase): a snapshot of the slots (psd/row_store.h) saves it first.
    // Null: none.
    using ChangeHook = void (*)(void* context, std::uint32_t slot);
    void set_change_hook(ChangeHook hook, void* context) {
        hook_ = hook;
        hook_context_ = context;
    }
    // Replaces the rows with `entries` (any order): std::invalid_argument naming the entry when
    // an id or a slot repeats or a slot is beyond the capacity. Counters are kept; the sketches
    // are cleared (ids not admitted start counting again).
    void restore(std::span<const Entry> entries);

  private:
    // Per slot: the id it holds (in two halves: 4-byte alignment keeps the record at 20 bytes), its
    // last update as an offset from base_, and its neighbours in update order (kNone ends).
    struct Slot {
        std::uint32_t id_low, id_high;
        std::uint32_t update;
        std::uint32_t prev, next;
        std::uint64_t id() const { return std::uint64_t{id_high} << 32 | id_low; }
        void set_id(std::uint64_t id) {
            id_low = static_cast<std::uint32_t>(id);
            id_high = static_cast<std::uint32_t>(id >> 32);
        }
    };
    static_assert(sizeof(Slot) == 20);
    // The map is a set of slot numbers, hashed and compared by their slots' ids, and looked up by
    // id (absl's heterogeneous lookup): a slot's id must be set before it is inserted.
    struct SlotHash {
        using is_transparent = void;
        const Slot* slots;
        std::size_t operator()(std::uint64_t id) const;
        std::size_t operator()(std::uint32_t slot) const { return (*this)(slots[slot].id()); }
    };
    struct SlotEq {
        using is_transparent = void;
        const Slot* slots;
        bool operator()(std::uint32_t a, std::uint32_t b) const { return a == b; }
        bool operator()(std::uint32_t slot, std::uint64_t id) const { return slots[slot].id() == id; }
        bool operator()(std::uint64_t id, std::uint32_t slot) const { return slots[slot].id() == id; }
    };
    void link_last(std::uint32_t slot);
    void unlink(std::uint32_t slot);
    void evict(std::uint32_t slot);
    bool admits(std::uint64_t id);
    std::uint32_t take_free_slot();
    // `step` as a slot's update offset from base_; first moves base_ up (rebase()) when `step` is
    // beyond what 32 bits hold. Steps before base_ read as base_.
    std::uint32_t stamp(std::uint64_t step);
    std::uint64_t last_update(std::uint32_t slot) const { return base_ + slots_[slot].update; }
    // base_ becomes `step` - 2^31: offsets are rewritten, those of rows last updated before the new
    // base (over 2^31 updates before `step`) become 0. O(rows), once per 2^31 updates at most.
    void rebase(std::uint64_t step);

    Policy policy_;
    Counters counters_;
    ZeroPages<Slot> slots_;  // capacity slots; [0, used_) have been used
    std::uint64_t used_ = 0;
    std::uint64_t base_ = 0;  // the update a slot's offset 0 stands for
    absl::flat_hash_set<std::uint32_t, SlotHash, SlotEq> map_;
    std::uint32_t oldest_ = kNone, newest_ = kNone;
    std::vector<std::uint32_t> free_;          // slots evicted, reused first
    std::optional<CountSketch> admit_sketch_;  // admit_after > 1
    std::optional<CountSketch> gate_;          // the frequency gate, from the first time full
    std::uint64_t draws_ = 0;
    ChangeHook hook_ = nullptr;
    void* hook_context_ = nullptr;
    void changing(std::uint32_t slot) const {
        if (hook_) hook_(hook_context_, slot);
    }
};

}  // namespace psrun::psd
