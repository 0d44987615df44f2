// RowStore's snapshot of its vocabulary tables for a checkpoint written by another thread
// (psd/row_store.h begin_snapshot(); the copy-on-write protocol is psd/row_snapshot.h's). A
// snapshot block's record: the block's created bits (one 8-byte word), with --ema-decay its rows'
// average update counts (kBlockRows words), then its parts, each kBlockRows rows.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

#include "psd/row_store.h"

namespace psrun::psd {
namespace {

constexpr std::uint64_t kBlockRows = RowSnapshot::kBlockRows;
static_assert(64 % kBlockRows == 0, "a block's created bits lie in one word of the bitmap");

// The created bits of block `block` (bit r: its row r), read while the poll loop may set other
// rows' bits of the same bitmap word.
std::uint64_t created_bits(const std::vector<std::uint64_t>& created, std::uint64_t block) {
    const std::uint64_t word =
        std::atomic_ref<std::uint64_t>(const_cast<std::uint64_t&>(created[block * kBlockRows / 64]))
            .load(std::memory_order_relaxed);
    return (word >> (block * kBlockRows % 64)) & ((std::uint64_t{1} << kBlockRows) - 1);
}

}  // namespace

bool RowStore::snapshot_supported() const {
    return std::none_of(tables_.begin(), tables_.end(), [](const Table& t) { return t.spec.keyed; });
}

void RowStore::begin_snapshot() {
    if (!snapshot_supported()) throw std::logic_error("a row snapshot of keyed tables is not supported");
    for (auto& table : tables_) {
        const bool average = !table.ema.empty();
        const std::size_t meta = sizeof(std::uint64_t) * (1 + (average ? kBlockRows : 0));
        table.snapshot =
            std::make_unique<RowSnapshot>((table.local_rows + kBlockRows - 1) / kBlockRows, part_arrays(table).count,
                                          kBlockRows * table.spec.width * sizeof(float), meta, average);
        table.snapshot_updates = table.updates;
    }
    snapshotting_ = true;
}

void RowStore::end_snapshot() {
    for (auto& table : tables_) table.snapshot.reset();
    snapshotting_ = false;
}

std::uint64_t RowStore::snapshot_bytes() const {
    std::uint64_t bytes = 0;
    for (const auto& table : tables_)
        if (table.snapshot) bytes += table.snapshot->saved_bytes();
    return bytes;
}

void RowStore::save_block(const Table& table, std::uint64_t block) const {
    table.snapshot->before_change(block, [&](std::size_t first_part, std::byte* record) {
        const std::uint64_t width = table.spec.width, row0 = block * kBlockRows;
        const std::uint64_t rows = std::min(kBlockRows, table.local_rows - row0);
        const std::uint64_t bits = created_bits(table.created, block);
        std::memcpy(record, &bits, sizeof bits);
        if (!table.ema.empty()) std::memcpy(record + sizeof bits, table.ema_at.data() + row0, rows * sizeof bits);
        const PartArrays arrays = part_arrays(table);
        std::byte* at = record + table.snapshot->meta_bytes();
        for (std::size_t p = first_part; p < arrays.count; ++p, at += table.snapshot->part_bytes())
            std::memcpy(at, arrays.at[p] + row0 * width, rows * width * sizeof(float));
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
    // The block's rows of this part as stored, then those read() derives.
    auto render = [&](std::uint64_t bits, const float* stored, const float* values, const float* ema,
                      const std::uint64_t* ema_at) {
        std::memcpy(rows.data(), stored, rows.size() * sizeof(float));
        DecayPower power;
        for (std::uint64_t r = 0; r < count; ++r)
            derived_row(table, part, row0 + r, bits >> r & 1, values ? values + r * width : nullptr,
                        average ? ema + r * width : nullptr, average ? ema_at[r] : 0, table.snapshot_updates, power,
                        rows.data() + r * width);
    };
    const PartArrays arrays = part_arrays(table);
    const bool has_average = !table.ema.empty();
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
            const std::byte* parts = record + table.snapshot->meta_bytes();
            auto part_at = [&](std::size_t k) {
                return reinterpret_cast<const float*>(parts + (k - first_part) * table.snapshot->part_bytes());
            };
            render(bits, part_at(p), has_average ? part_at(0) : nullptr,
                   has_average ? part_at(arrays.count - 1) : nullptr,
                   has_average ? reinterpret_cast<const std::uint64_t*>(record + sizeof bits) : nullptr);
        });
}

}  // namespace psrun::psd
