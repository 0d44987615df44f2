// The keyed tables' part of a shard's checkpoint (psd/shard_checkpoint_rows.h): the id -> slot map
// beside the slot arrays, and the restore that re-hashes ids into any shard count.
#include <algorithm>
#include <cstring>

#include "psd/shard_checkpoint_rows.h"

namespace psrun::psd {
namespace {

constexpr std::size_t kKeyedChunkFloats = 1 << 18;  // source slots read 1 MiB at a time
constexpr std::uint64_t kDigit = 1 << 16;

void put_key_digits(std::vector<float>& out, std::uint64_t v, int digits) {
    for (int d = 0; d < digits; ++d, v >>= 16) out.push_back(static_cast<float>(v & (kDigit - 1)));
}

// Digits [at, at + n) of `f` as one integer; false when one is not an integer in [0, 2^16).
bool key_digits_value(std::span<const float> f, std::size_t at, int n, std::uint64_t& out) {
    out = 0;
    for (int d = n - 1; d >= 0; --d) {
        const float x = f[at + static_cast<std::size_t>(d)];
        if (!(x >= 0.0f && x < static_cast<float>(kDigit)) || x != static_cast<float>(static_cast<std::uint32_t>(x)))
            return false;
        out = (out << 16) | static_cast<std::uint64_t>(x);
    }
    return true;
}

}  // namespace

std::vector<float> encode_keyed_entries(std::span<const RowIndex::Entry> entries) {
    std::vector<float> out;
    out.reserve(entries.size() * kKeyedEntryFloats);
    for (const auto& e : entries) {
        put_key_digits(out, e.id, 4);
        put_key_digits(out, e.slot, 2);
        put_key_digits(out, e.last_update, 4);
    }
    return out;
}

Result<std::vector<RowIndex::Entry>> decode_keyed_entries(std::span<const float> floats, std::uint64_t capacity,
                                                          const std::string& where) {
    if (floats.size() % kKeyedEntryFloats != 0)
        return invalid_argument(where + ": a keyed table's id map is misshaped");
    std::vector<RowIndex::Entry> out(floats.size() / kKeyedEntryFloats);
    for (std::size_t i = 0; i < out.size(); ++i) {
        std::uint64_t slot = 0;
        const std::size_t at = i * kKeyedEntryFloats;
        if (!key_digits_value(floats, at, 4, out[i].id) || !key_digits_value(floats, at + 4, 2, slot) ||
            !key_digits_value(floats, at + 6, 4, out[i].last_update) || slot >= capacity)
            return invalid_argument(where + ": entry " + std::to_string(i) + " of a keyed table's id map is damaged");
        out[i].slot = static_cast<std::uint32_t>(slot);
    }
    return out;
}

Result<void> load_keyed_rows(RowStore& rows, std::size_t t, const RowRestorePlan::Table& plan,
                             const std::vector<TensorFileReader>& files) {
    const RowTable& table = rows.table(t);
    const std::size_t width = table.width;
    const std::uint32_t target_shards = rows.num_shards(), target = rows.shard();
    // Every source shard's rows that this shard owns (RowTable::owner), with where they were.
    struct Found {
        RowIndex::Entry entry;
        std::uint32_t source = 0;
    };
    std::vector<Found> found;
    for (std::uint32_t s = 0; s < plan.source_shards; ++s) {
        const RowPiece* piece = plan.pieces[s];
        if (!piece) continue;  // no slot there (a small table placed whole on another shard)
        const auto& entry = files[piece->file].tensors()[static_cast<std::size_t>(piece->keys)];
        std::vector<float> digits(entry.count);
        if (auto ok = files[piece->file].read(static_cast<std::size_t>(piece->keys), 0, digits); !ok) return ok;
        PSRUN_TRY_ASSIGN(auto entries,
                         decode_keyed_entries(digits, plan.source.rows_on(s, plan.source_shards), entry.name));
        for (const auto& e : entries)
            if (table.owner(e.id, target_shards) == target) found.push_back(Found{e, s});
    }
    // More than this shard's slots (fewer shards, or skew): the most recently updated stay.
    const std::uint64_t capacity = rows.local_rows(t);
    if (found.size() > capacity) {
        std::nth_element(found.begin(), found.begin() + static_cast<std::ptrdiff_t>(capacity), found.end(),
                         [](const Found& a, const Found& b) { return a.entry.last_update > b.entry.last_update; });
        found.resize(capacity);
    }
    std::vector<RowIndex::Entry> entries;
    entries.reserve(found.size());
    // Per source shard: source slot -> this shard's slot.
    std::vector<std::vector<std::uint32_t>> to(plan.source_shards);
    for (std::size_t i = 0; i < found.size(); ++i) {
        auto& map = to[found[i].source];
        if (map.empty()) map.assign(plan.source.rows_on(found[i].source, plan.source_shards), RowIndex::kNone);
        map[found[i].entry.slot] = static_cast<std::uint32_t>(i);
        entries.push_back(
            RowIndex::Entry{found[i].entry.id, static_cast<std::uint32_t>(i), found[i].entry.last_update});
    }
    auto destinations = rows.slots(t);
    destinations.insert(destinations.begin(), rows.values(t));  // param, then slots
    if (!plan.slots) destinations.resize(1);
    if (plan.average) destinations.push_back(rows.average(t));
    std::vector<float> chunk;
    for (std::uint32_t s = 0; s < plan.source_shards; ++s) {
        if (to[s].empty()) continue;  // none of its rows comes here
        const RowPiece* piece = plan.pieces[s];
        std::vector<int> parts{piece->param};
        if (plan.slots) parts.insert(parts.end(), piece->slots.begin(), piece->slots.end());
        if (plan.average) parts.push_back(piece->ema);
        const std::uint64_t per_chunk = std::max<std::uint64_t>(1, kKeyedChunkFloats / width);
        chunk.resize(per_chunk * width);
        for (std::size_t j = 0; j < parts.size(); ++j)
            for (std::uint64_t first = 0; first < to[s].size(); first += per_chunk) {
                const std::uint64_t n = std::min<std::uint64_t>(per_chunk, to[s].size() - first);
                if (std::none_of(to[s].begin() + static_cast<std::ptrdiff_t>(first),
                                 to[s].begin() + static_cast<std::ptrdiff_t>(first + n),
                                 [](std::uint32_t v) { return v != RowIndex::kNone; }))
                    continue;
                const auto e = static_cast<std::size_t>(parts[j]);
                if (auto ok = files[piece->file].read(e, first * width, std::span<float>(chunk.data(), n * width)); !ok)
                    return ok;
                for (std::uint64_t i = 0; i < n; ++i)
                    if (const auto slot = to[s][first + i]; slot != RowIndex::kNone)
                        std::memcpy(destinations[j].data() + std::size_t{slot} * width, chunk.data() + i * width,
                                    width * sizeof(float));
            }
    }
    rows.restore_index(t, entries);
    return {};
}

}  // namespace psrun::psd
