// RowStore's checkpoint reads (psd/row_store.h read()): a vocabulary table's rows as
// materialize() would leave them, computed where they differ, without writing to the table.
#include <algorithm>
#include <cstring>

#include "common/row_init.h"
#include "psd/row_store.h"

namespace psrun::psd {

void RowStore::catch_up_keyed() {
    for (auto& table : tables_) {
        if (!table.spec.keyed || table.ema.empty() || !table.index) continue;
        DecayPower power;
        for (const auto& e : table.index->entries()) catch_up(table, e.slot, table.updates, power);
    }
}

void RowStore::read(std::size_t t, Part part, std::uint64_t first, std::span<float> out) const {
    const Table& table = tables_[t];
    const float* stored = part_arrays(table).at[part_index(table, part)];
    const std::uint64_t width = table.spec.width, end = first + out.size();
    const bool average = part == Part::kAverage;
    std::vector<float> row(width);
    DecayPower power;
    // A row never created is derived (or zero), not read: its pages were never written, and a read
    // would back them with memory (on huge-page regions, recent kernels allocate at a read fault:
    // a whole write of a 32M-row table once left psd at the table's size for a million rows used).
    for (std::uint64_t i = first / width; i * width < end; ++i) {
        const std::uint64_t bits = table.created[i >> 6];
        const std::uint64_t from = std::max(first, i * width);
        if (bits == ~std::uint64_t{0} && !average && (i & 63) == 0 && from == i * width) {  // 64 created rows
            const std::uint64_t to = std::min(end, (i + 64) * width);
            std::memcpy(out.data() + (from - first), stored + from, (to - from) * sizeof(float));
            i += 63;
            continue;
        }
        const std::uint64_t to = std::min(end, (i + 1) * width);
        const bool created = bits >> (i & 63) & 1;
        const float* src = stored + from;
        if (!created) src = nullptr;  // zero unless derived below
        if (!table.spec.keyed && derived_row(table, part, i, created, table.values.data() + i * width,
                                             average ? table.ema.data() + i * width : nullptr,
                                             average ? table.ema_at.data()[i] : 0, table.updates, power, row.data()))
            src = row.data() + (from - i * width);
        if (src) std::memcpy(out.data() + (from - first), src, (to - from) * sizeof(float));
        else std::fill(out.data() + (from - first), out.data() + (to - first), 0.0f);
    }
}

bool RowStore::derived_row(const Table& table, Part part, std::uint64_t i, bool created, const float* values,
                           const float* ema, std::uint64_t ema_at, std::uint64_t updates, DecayPower& power,
                           float* row) const {
    const std::size_t width = table.spec.width;
    if (created) {  // as catch_up() would bring it, when behind
        if (part != Part::kAverage || ema_at >= updates) return false;
        power = power_for(updates - ema_at, power);
        decay_toward(values, ema, power, width, row);
        return true;
    }
    // as create_row() would make it
    if (part == Part::kValues || part == Part::kAverage) {
        fill_row(table.init, table.spec.global_row(i, shard_, num_shards_), std::span<float>(row, width));
        return true;
    }
    if (part == Part::kSlot0 && config_.kind == OptimizerKind::kAdagrad) {
        std::fill_n(row, width, config_.adagrad_initial);
        return true;
    }
    return false;  // a fresh slot of the others is the zero page it is
}

RowStore::PartArrays RowStore::part_arrays(const Table& table) {
    PartArrays arrays;
    arrays.at[arrays.count++] = table.values.data();
    if (!table.slot0.empty()) arrays.at[arrays.count++] = table.slot0.data();
    if (!table.slot1.empty()) arrays.at[arrays.count++] = table.slot1.data();
    if (!table.ema.empty()) arrays.at[arrays.count++] = table.ema.data();
    return arrays;
}

std::size_t RowStore::part_index(const Table& table, Part part) {
    switch (part) {
        case Part::kValues: return 0;
        case Part::kSlot0: return 1;
        case Part::kSlot1: return 2;
        case Part::kAverage: return part_arrays(table).count - 1;
    }
    return 0;
}

}  // namespace psrun::psd
