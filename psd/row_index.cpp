#include "psd/row_index.h"

#include <algorithm>
#include <bit>
#include <stdexcept>
#include <string>

namespace psrun::psd {
namespace {

std::uint64_t mix(std::uint64_t x) {  // splitmix64's finaliser
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
    x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
    return x ^ (x >> 31);
}

// A slot's update offset, at most; a new base leaves half of it for the updates to come.
constexpr std::uint64_t kMaxStamp = 0xFFFFFFFFull;
std::uint64_t stamp_base(std::uint64_t newest) { return newest > kMaxStamp / 2 ? newest - kMaxStamp / 2 : 0; }
// `update` as an offset from `base` (one before the base reads as the base; the caller keeps it
// within kMaxStamp above).
std::uint32_t offset_from(std::uint64_t base, std::uint64_t update) {
    return static_cast<std::uint32_t>(update > base ? update - base : 0);
}

std::uint64_t sketch_width(std::uint64_t rows) {
    return std::clamp<std::uint64_t>(std::bit_ceil(rows), 1ull << 10, 1ull << 22);
}

}  // namespace

std::size_t RowIndex::SlotHash::operator()(std::uint64_t id) const {
    return mix(id + 0x9E3779B97F4A7C15ull);  // absl takes its buckets and tags from all 64 bits
}

RowIndex::RowIndex(const Policy& policy)
    : policy_(policy),
      slots_(policy.capacity >= 1 && policy.capacity < kNone ? policy.capacity : 0),
      map_(0, SlotHash{slots_.data()}, SlotEq{slots_.data()}) {
    if (policy.capacity < 1 || policy.capacity >= kNone)
        throw std::invalid_argument("row index capacity " + std::to_string(policy.capacity) +
                                    " is out of range (1 to 4294967294 rows per shard)");
    if (policy.admit_after < 1 || policy.admit_after > 65535)
        throw std::invalid_argument("admit_after " + std::to_string(policy.admit_after) +
                                    " is out of range (1 to 65535 occurrences)");
    if (policy.evict_after > kMaxEvictAfter)
        throw std::invalid_argument("evict_after " + std::to_string(policy.evict_after) + " is out of range (0 to " +
                                    std::to_string(kMaxEvictAfter) + " updates)");
    if (!(policy.admit_probability > 0.0 && policy.admit_probability <= 1.0))
        throw std::invalid_argument("admit_probability " + std::to_string(policy.admit_probability) +
                                    " is out of range (0, 1]");
    if (policy.admit_after > 1) admit_sketch_.emplace(sketch_width(policy.capacity * 4), 0, policy.seed);
}

std::uint32_t RowIndex::find(std::uint64_t id) const {
    auto it = map_.find(id);
    return it == map_.end() ? kNone : *it;
}

std::uint64_t RowIndex::bytes() const {
    const std::uint64_t sketches = (admit_sketch_ ? admit_sketch_->width() * 4 : 0) + (gate_ ? gate_->width() * 4 : 0);
    return used_ * sizeof(Slot) + map_.bucket_count() * (sizeof(std::uint32_t) + 1) +
           free_.capacity() * sizeof(std::uint32_t) + sketches;
}

bool RowIndex::admits(std::uint64_t id) {
    if (admit_sketch_ && admit_sketch_->add(id) < policy_.admit_after) return false;
    if (policy_.admit_probability < 1.0) {
        const std::uint64_t draw = mix(mix(id + policy_.seed) ^ ++draws_);
        if (static_cast<double>(draw >> 11) * 0x1.0p-53 >= policy_.admit_probability) return false;
    }
    return true;
}

std::uint32_t RowIndex::take_free_slot() {
    if (!free_.empty()) {
        const std::uint32_t slot = free_.back();
        free_.pop_back();
        return slot;
    }
    if (used_ < policy_.capacity) return static_cast<std::uint32_t>(used_++);
    return kNone;
}

RowIndex::Occurrence RowIndex::occur(std::uint64_t id, std::uint64_t step) {
    Occurrence out;
    const std::uint32_t frequency = gate_ ? gate_->add(id) : 0;
    if (const std::uint32_t slot = find(id); slot != kNone) {
        out.slot = slot;
        return out;
    }
    if (!admits(id)) {
        ++counters_.refused;
        return out;
    }
    std::uint32_t slot = take_free_slot();
    if (slot == kNone) {  // full: the least recently updated row makes room, if used less often
        if (policy_.frequency_gate) {
            if (!gate_) {  // the first time full: counting starts now, this occurrence included
                const std::uint64_t width = sketch_width(policy_.capacity);
                gate_.emplace(width, 10 * width, policy_.seed ^ 0x5851F42D4C957F2Dull);
                gate_->add(id);
            } else if (frequency <= gate_->estimate(slots_[oldest_].id())) {
                ++counters_.refused_full;
                return out;
            }
        }
        slot = oldest_;
        out.evicted = slots_[slot].id();
        evict(slot);
        ++counters_.evicted_full;
        free_.pop_back();  // evict() freed it; it is taken here
    }
    out.created = true;
    const std::uint32_t update = stamp(step);
    changing(slot);
    slots_[slot].set_id(id);  // before the insert: the map hashes the slot by its id
    slots_[slot].update = update;
    map_.insert(slot);
    link_last(slot);
    ++counters_.admitted;
    out.slot = slot;
    return out;
}

void RowIndex::updated(std::uint32_t slot, std::uint64_t step) {
    const std::uint32_t update = stamp(step);
    changing(slot);
    slots_[slot].update = std::max(slots_[slot].update, update);
    if (newest_ == slot) return;
    unlink(slot);
    link_last(slot);
}

std::vector<RowIndex::Entry> RowIndex::sweep(std::uint64_t step) {
    std::vector<Entry> out;
    if (policy_.evict_after == 0) return out;
    while (oldest_ != kNone && last_update(oldest_) + policy_.evict_after < step) {
        const std::uint32_t slot = oldest_;
        out.push_back({.id = slots_[slot].id(), .slot = slot, .last_update = last_update(slot)});
        evict(slot);
        ++counters_.evicted_idle;
    }
    return out;
}

std::vector<RowIndex::Entry> RowIndex::entries() const {
    std::vector<Entry> out;
    out.reserve(map_.size());
    for (std::uint32_t s = oldest_; s != kNone; s = slots_[s].next)
        out.push_back({.id = slots_[s].id(), .slot = s, .last_update = last_update(s)});
    return out;
}

void RowIndex::restore(std::span<const Entry> entries) {
    std::vector<Entry> sorted(entries.begin(), entries.end());
    std::stable_sort(sorted.begin(), sorted.end(),
                     [](const Entry& a, const Entry& b) { return a.last_update < b.last_update; });
    std::uint64_t highest = 0;
    for (const Entry& e : sorted) {
        if (e.slot >= policy_.capacity)
            throw std::invalid_argument("row index entry for id " + std::to_string(e.id) + ": slot " +
                                        std::to_string(e.slot) + " is beyond the capacity of " +
                                        std::to_string(policy_.capacity) + " rows");
        highest = std::max<std::uint64_t>(highest, e.slot + 1);
    }
    map_.clear();
    map_.reserve(sorted.size());
    free_.clear();
    used_ = highest;
    oldest_ = newest_ = kNone;
    base_ = sorted.empty() ? 0 : stamp_base(sorted.back().last_update);
    std::vector<bool> used(highest, false);
    for (const Entry& e : sorted) {
        if (used[e.slot] || map_.contains(e.id))
            throw std::invalid_argument("row index entry for id " + std::to_string(e.id) + " (slot " +
                                        std::to_string(e.slot) +
                                        "): " + (used[e.slot] ? "the slot is given twice" : "the id is given twice"));
        used[e.slot] = true;
        slots_[e.slot].set_id(e.id);
        slots_[e.slot].update = offset_from(base_, e.last_update);
        map_.insert(e.slot);
        link_last(e.slot);
    }
    for (std::uint64_t s = highest; s-- > 0;)
        if (!used[s]) free_.push_back(static_cast<std::uint32_t>(s));
    if (admit_sketch_) admit_sketch_->clear();
    gate_.reset();
}

std::uint32_t RowIndex::stamp(std::uint64_t step) {
    if (step > base_ && step - base_ > kMaxStamp) rebase(step);
    return offset_from(base_, step);
}

void RowIndex::rebase(std::uint64_t step) {
    const std::uint64_t base = stamp_base(step);
    for (std::uint32_t s = oldest_; s != kNone; s = slots_[s].next) changing(s);  // all, before base_ moves
    for (std::uint32_t s = oldest_; s != kNone; s = slots_[s].next)
        slots_[s].update = offset_from(base, last_update(s));
    base_ = base;
}

void RowIndex::link_last(std::uint32_t slot) {
    slots_[slot].prev = newest_;
    slots_[slot].next = kNone;
    if (newest_ != kNone) slots_[newest_].next = slot;
    newest_ = slot;
    if (oldest_ == kNone) oldest_ = slot;
}

void RowIndex::unlink(std::uint32_t slot) {
    Slot& s = slots_[slot];
    (s.prev != kNone ? slots_[s.prev].next : oldest_) = s.next;
    (s.next != kNone ? slots_[s.next].prev : newest_) = s.prev;
    s.prev = s.next = kNone;
}

void RowIndex::evict(std::uint32_t slot) {
    unlink(slot);
    map_.erase(slot);
    free_.push_back(slot);
}

}  // namespace psrun::psd
