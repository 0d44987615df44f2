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
    const float* stored = part == Part::kValues  ? table.values.data()
                          : part == Part::kSlot0 ? table.slot0.data()
                          : part == Part::kSlot1 ? table.slot1.data()
                                                 : table.ema.data();
    std::memcpy(out.data(), stored + first, out.size_bytes());  // zero pages where nothing was written
    if (table.spec.keyed || out.empty()) return;
    const std::uint64_t width = table.spec.width, end = first + out.size();
    std::vector<float> row(width);
    DecayPower power;
    for (std::uint64_t i = first / width; i * width < end; ++i) {
        const std::uint64_t bits = table.created[i >> 6];
        if (bits == ~std::uint64_t{0} && part != Part::kAverage && (i & 63) == 0) {  // 64 created rows: as stored
            i += 63;
            continue;
        }
        const bool created = bits >> (i & 63) & 1;
        if (created && (part != Part::kAverage || table.ema_at.data()[i] >= table.updates)) continue;
        if (!created) {  // as create_row() would make it
            if (part == Part::kValues || part == Part::kAverage)
                fill_row(table.init, table.spec.global_row(i, shard_, num_shards_), row);
            else if (part == Part::kSlot0 && config_.kind == OptimizerKind::kAdagrad)
                std::fill(row.begin(), row.end(), config_.adagrad_initial);
            else continue;  // a fresh slot of the others is the zero page it is
        } else {            // as catch_up() would bring it
            power = power_for(table.updates - table.ema_at.data()[i], power);
            decay_toward(table.values.data() + i * width, table.ema.data() + i * width, power, width, row.data());
        }
        const std::uint64_t from = std::max(first, i * width), to = std::min(end, (i + 1) * width);
        std::memcpy(out.data() + (from - first), row.data() + (from - i * width), (to - from) * sizeof(float));
    }
}

}  // namespace psrun::psd
