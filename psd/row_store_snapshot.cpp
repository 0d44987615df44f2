// RowStore's snapshot of its tables for a checkpoint written by another thread (psd/row_store.h
// begin_snapshot(); the copy-on-write protocol is psd/row_snapshot.h's). A snapshot block's
// record: the block's created bits (one 8-byte word; for a keyed table, which slots hold a row),
// with --ema-decay its rows' average update counts (kBlockRows words), then its parts, each
// kBlockRows rows: values, slots, average, and for a keyed table its slots' ids and last updates
// (two words each).
#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

#include "psd/row_store.h"
#include "psd/shard_checkpoint_rows.h"

namespace psrun::psd {
namespace {

constexpr std::uint64_t kBlockRows = RowSnapshot::kBlockRows;
static_assert(64 % kBlockRows == 0, "a block's created bits lie in one word of the bitmap");
constexpr std::size_t kKeyBytes = 2 * sizeof(std::uint64_t);  // a slot's id and last update

// The created bits of block `block` (bit r: its row r), read while the poll loop may set other
// rows' bits of the same bitmap word.
std::uint64_t created_bits(const std::vector<std::uint64_t>& created, std::uint64_t block) {
    const std::uint64_t word =
        std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(created[block * kBlockRows / 64]))
            .load(std::memory_order_relaxed);
    return (word >> (block * kBlockRows % 64)) & ((std::uint64_t{1} << kBlockRows) - 1);
}

}  // namespace

std::vector<RowStore::BlockSet> RowStore::take_dirty() {
    std::vector<BlockSet> out;
    for (auto& table : tables_) {
        out.push_back(std::move(table.dirty));
        clear_dirty(table);
    }
    return out;
}

void RowStore::merge_dirty(const std::vector<BlockSet>& dirty) {
    for (std::size_t t = 0; t < tables_.size() && t < dirty.size(); ++t)
        for (std::size_t w = 0; w < tables_[t].dirty.size() && w < dirty[t].size(); ++w)
            tables_[t].dirty[w] |= dirty[t][w];
}

void RowStore::begin_snapshot(const std::vector<BlockSet>* only) {
    for (std::size_t t = 0; t < tables_.size(); ++t) {
        auto& table = tables_[t];
        const bool average = !table.ema.empty();
        const std::size_t meta = sizeof(std::uint64_t) * (1 + (average ? kBlockRows : 0));
        std::vector<std::size_t> parts(part_arrays(table).count, kBlockRows * table.spec.width * sizeof(float));
        if (table.index) parts.push_back(kBlockRows * kKeyBytes);
        table.snapshot = std::make_unique<RowSnapshot>((table.local_rows + kBlockRows - 1) / kBlockRows,
                                                       std::move(parts), meta, average);
        if (only && t < only->size() && !table.index) {
            const BlockSet& keep = (*only)[t];
            for (std::uint64_t b = 0; b * kBlockRows < table.local_rows; ++b)
                if (b / 64 >= keep.size() || !(keep[b / 64] >> (b % 64) & 1)) table.snapshot->skip(b);
        }
        table.snapshot_updates = table.updates;
        if (table.index) {
            table.snapshot_rows = table.index->rows();
            table.snapshot_used = table.index->used();
            table.index->set_change_hook(&RowStore::index_changing, &table);
        }
    }
    snapshotting_ = true;
}

void RowStore::end_snapshot() {
    for (auto& table : tables_) {
        table.snapshot.reset();
        if (table.index) table.index->set_change_hook(nullptr, nullptr);
    }
    snapshotting_ = false;
}

std::uint64_t RowStore::snapshot_bytes() const {
    std::uint64_t bytes = 0;
    for (const auto& table : tables_)
        if (table.snapshot) bytes += table.snapshot->saved_bytes();
    return bytes;
}

void RowStore::index_changing(void* table, std::uint32_t slot) {
    keep_for_snapshot(*static_cast<const Table*>(table), slot);
}

void RowStore::save_block(const Table& table, std::uint64_t block) {
    const RowSnapshot& snapshot = *table.snapshot;
    table.snapshot->before_change(block, [&](std::size_t first_part, std::byte* record) {
        const std::uint64_t width = table.spec.width, row0 = block * kBlockRows;
        const std::uint64_t rows = std::min(kBlockRows, table.local_rows - row0);
        const std::uint64_t bits = created_bits(table.created, block);
        std::memcpy(record, &bits, sizeof bits);
        if (!table.ema.empty()) std::memcpy(record + sizeof bits, table.ema_at.data() + row0, rows * sizeof bits);
        const PartArrays arrays = part_arrays(table);
        for (std::size_t p = first_part; p < arrays.count; ++p)
            std::memcpy(record + snapshot.part_offset(first_part, p), arrays.at[p] + row0 * width,
                        rows * width * sizeof(float));
        if (!table.index) return;
        std::byte* keys = record + snapshot.part_offset(first_part, arrays.count);
        for (std::uint64_t r = 0; r < rows; ++r) {
            if (!(bits >> r & 1)) continue;  // no row: its id is not read
            const RowIndex::Entry e = table.index->entry_at(static_cast<std::uint32_t>(row0 + r));
            std::memcpy(keys + r * kKeyBytes, &e.id, sizeof e.id);
            std::memcpy(keys + r * kKeyBytes + sizeof e.id, &e.last_update, sizeof e.last_update);
        }
    });
}

void RowStore::read_snapshot(std::size_t t, Part part, std::uint64_t first, std::span<float> out,
                             SnapshotCursor& cursor) const {
    const Table& table = tables_[t];
    if (!table.snapshot) throw std::logic_error("read_snapshot() without begin_snapshot()");
    const std::uint64_t block_floats = kBlockRows * table.spec.width, end = first + out.size();
    const std::size_t p = part_index(table, part);
    for (std::uint64_t at = first; at < end;) {
        const std::uint64_t block = at / block_floats;
        if (cursor.block != block) {
            read_snapshot_block(table, part, p, block, cursor.rows);
            cursor.block = block;
        }
        const std::uint64_t to = std::min(end, (block + 1) * block_floats);
        std::memcpy(out.data() + (at - first), cursor.rows.data() + (at - block * block_floats),
                    (to - at) * sizeof(float));
        at = to;
    }
}

void RowStore::read_snapshot_block(const Table& table, Part part, std::size_t p, std::uint64_t block,
                                   std::vector<float>& rows) const {
    const std::uint64_t width = table.spec.width, row0 = block * kBlockRows;
    const std::uint64_t count = std::min(kBlockRows, table.local_rows - row0);
    const bool average = part == Part::kAverage;
    rows.resize(count * width);
    // The block's rows of this part as stored, then those read() derives (a keyed table: only
    // the averages of its rows, brought up to date).
    auto render = [&](std::uint64_t bits, const float* stored, const float* values, const float* ema,
                      const std::uint64_t* ema_at) {
        // A block with no row created is not read (RowStore::read(): its pages would be backed).
        if (bits != 0) std::memcpy(rows.data(), stored, rows.size() * sizeof(float));
        else std::fill(rows.begin(), rows.end(), 0.0f);
        if (table.spec.keyed && !average) return;
        DecayPower power;
        for (std::uint64_t r = 0; r < count; ++r) {
            const bool created = bits >> r & 1;
            if (table.spec.keyed && !created) continue;  // no row: as it is
            derived_row(table, part, row0 + r, created, values ? values + r * width : nullptr,
                        average ? ema + r * width : nullptr, average ? ema_at[r] : 0, table.snapshot_updates, power,
                        rows.data() + r * width);
        }
    };
    const PartArrays arrays = part_arrays(table);
    const bool has_average = !table.ema.empty();
    const RowSnapshot& snapshot = *table.snapshot;
    table.snapshot->read(
        block, p,
        [&] {  // as the table has them (discarded if the loop saved the block meanwhile)
            render(created_bits(table.created, block), arrays.at[p] + row0 * width, table.values.data() + row0 * width,
                   has_average ? table.ema.data() + row0 * width : nullptr,
                   has_average ? table.ema_at.data() + row0 : nullptr);
        },
        [&](const std::byte* record, std::size_t first_part) {  // saved before the loop changed it
            std::uint64_t bits = 0;
            std::memcpy(&bits, record, sizeof bits);
            auto part_at = [&](std::size_t k) {
                return reinterpret_cast<const float*>(record + snapshot.part_offset(first_part, k));
            };
            render(bits, part_at(p), has_average ? part_at(0) : nullptr,
                   has_average ? part_at(arrays.count - 1) : nullptr,
                   has_average ? reinterpret_cast<const std::uint64_t*>(record + sizeof bits) : nullptr);
        });
}

bool RowStore::read_snapshot_keys(std::size_t t, std::uint64_t first, std::span<float> out,
                                  SnapshotCursor& cursor) const {
    const Table& table = tables_[t];
    if (!table.snapshot || !table.index) throw std::logic_error("read_snapshot_keys() of no keyed snapshot");
    const std::size_t p = part_arrays(table).count;  // the keys: the last part
    const RowSnapshot& snapshot = *table.snapshot;
    if (first != cursor.emitted) return false;  // pieces come in order
    for (std::size_t done = 0; done < out.size();) {
        if (cursor.rows.empty()) {  // the next block's rows
            const std::uint64_t block = cursor.block + 1;
            if (block * kBlockRows >= table.snapshot_used) return false;  // fewer rows than at the start
            cursor.block = block;
            const std::uint64_t row0 = block * kBlockRows;
            const std::uint64_t count = std::min(kBlockRows, table.snapshot_used - row0);
            std::vector<RowIndex::Entry> entries;
            table.snapshot->read(
                block, p,
                [&] {
                    entries.clear();
                    const std::uint64_t bits = created_bits(table.created, block);
                    for (std::uint64_t r = 0; r < count; ++r)
                        if (bits >> r & 1)
                            entries.push_back(table.index->entry_at(static_cast<std::uint32_t>(row0 + r)));
                },
                [&](const std::byte* record, std::size_t first_part) {
                    entries.clear();
                    std::uint64_t bits = 0;
                    std::memcpy(&bits, record, sizeof bits);
                    const std::byte* keys = record + snapshot.part_offset(first_part, p);
                    for (std::uint64_t r = 0; r < count; ++r) {
                        if (!(bits >> r & 1)) continue;
                        RowIndex::Entry e{.slot = static_cast<std::uint32_t>(row0 + r)};
                        std::memcpy(&e.id, keys + r * kKeyBytes, sizeof e.id);
                        std::memcpy(&e.last_update, keys + r * kKeyBytes + sizeof e.id, sizeof e.last_update);
                        entries.push_back(e);
                    }
                });
            cursor.rows = encode_keyed_entries(entries);
            continue;
        }
        const std::size_t n = std::min(cursor.rows.size(), out.size() - done);
        std::memcpy(out.data() + done, cursor.rows.data(), n * sizeof(float));
        cursor.rows.erase(cursor.rows.begin(), cursor.rows.begin() + static_cast<std::ptrdiff_t>(n));
        done += n;
    }
    cursor.emitted += out.size();
    return true;
}

}  // namespace psrun::psd
