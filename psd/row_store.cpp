#include "psd/row_store.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <stdexcept>

#include "common/row_init.h"

namespace psrun::psd {
namespace {
// Rows initialised per team part and task: large enough that waking helpers pays.
constexpr std::uint64_t kParallelInitRows = 1 << 14;
}  // namespace

RowStore::RowStore(const ShardLayout& layout, std::uint32_t shard, const std::vector<TensorSpec>& tensors)
    : shard_(shard), num_shards_(layout.num_shards) {
    for (const auto& t : layout.tables) {
        Table table;
        table.spec = t;
        table.init = tensors.at(t.tensor).row_init;
        table.policy = tensors.at(t.tensor).row_policy;
        table.name = tensors.at(t.tensor).name;
        table.local_rows = t.rows_on(shard, num_shards_);
        clear_dirty(table);
        tables_.push_back(std::move(table));
    }
}

// A fresh dirty epoch, distinct across every RowStore of the process (a shard re-created by INIT).
std::uint64_t RowStore::next_dirty_epoch() {
    static std::atomic<std::uint64_t> epochs{0};
    return ++epochs;
}

void RowStore::allocate(const OptimizerConfig& config, const std::vector<bool>* lazy) {
    set_config(config);
    dirty_epoch_ = next_dirty_epoch();
    for (std::size_t t = 0; t < tables_.size(); ++t) {
        auto& table = tables_[t];
        table.values = Floats();  // never two copies of a table at once
        table.values = Floats(table.local_rows * table.spec.width);
        // Keyed: no row until restore_index() says which slots hold one; lazy: until the load fills it.
        const bool none = table.spec.keyed || (lazy && t < lazy->size() && (*lazy)[t]);
        table.created.assign((table.local_rows + 63) / 64, none ? 0 : ~std::uint64_t{0});
        clear_dirty(table);
        reset_index(table);
        table.dropped = 0;
        reset_slots(t);
        table.updates = 0;
        table.ema = Floats();  // filled by the load, then start_average()
        table.ema_at = ZeroPages<std::uint64_t>();
        if (averaging()) {
            table.ema = Floats(table.local_rows * table.spec.width);
            table.ema_at = ZeroPages<std::uint64_t>(table.local_rows);
        }
    }
}

void RowStore::reset_slots(std::size_t t) {
    auto& table = tables_[t];
    const std::size_t n = table.local_rows * table.spec.width;
    const int slots = slot_count(config_.kind);
    table.slot0 = Floats();
    table.slot1 = Floats();
    if (slots >= 1) table.slot0 = Floats(n);
    if (slots >= 2) table.slot1 = Floats(n);
    if (config_.kind != OptimizerKind::kAdagrad || config_.adagrad_initial == 0.0f) return;
    const std::size_t width = table.spec.width;
    for (std::uint64_t i = 0; i < table.local_rows; ++i)  // created rows: the initial accumulator now
        if (table.created[i >> 6] >> (i & 63) & 1)
            std::fill_n(table.slot0.data() + i * width, width, config_.adagrad_initial);
}

void RowStore::init(const OptimizerConfig& config) {
    set_config(config);
    dirty_epoch_ = next_dirty_epoch();
    for (std::size_t t = 0; t < tables_.size(); ++t) {
        auto& table = tables_[t];
        table.values = Floats();
        table.values = Floats(table.local_rows * table.spec.width);
        table.created.assign((table.local_rows + 63) / 64, 0);  // before the slots: none to fill yet
        clear_dirty(table);
        reset_index(table);
        table.dropped = 0;
        reset_slots(t);
        table.updates = 0;
        reset_average(t);
    }
}

void RowStore::reset_index(Table& table) const {
    table.index.reset();
    if (!table.spec.keyed || table.local_rows == 0) return;  // a small keyed table placed whole elsewhere: none here
    RowIndex::Policy policy;
    policy.capacity = table.local_rows;
    policy.admit_after = table.policy.admit_after;
    policy.admit_probability = table.policy.admit_probability;
    policy.evict_after = table.policy.evict_after;
    policy.seed = table.init.seed ^ (std::uint64_t{shard_} << 48);  // the shards' admission draws differ
    table.index = std::make_unique<RowIndex>(policy);
}

void RowStore::restore_index(std::size_t t, std::span<const RowIndex::Entry> entries) {
    auto& table = tables_[t];
    if (!table.index && table.spec.keyed && entries.empty()) return;  // no slot on this shard (placed whole elsewhere)
    if (!table.index) throw std::invalid_argument("restore_index: table " + table.name + " is not keyed here");
    table.index->restore(entries);
    std::fill(table.created.begin(), table.created.end(), 0);
    for (const auto& e : entries) table.created[e.slot >> 6] |= std::uint64_t{1} << (e.slot & 63);
}

void RowStore::create_row(Table& table, std::uint64_t i, std::uint64_t id) const {
    keep_for_snapshot(table, i);
    const std::uint32_t width = table.spec.width;
    fill_row(table.init, id, std::span<float>(table.values.data() + i * width, width));
    const int slots = slot_count(config_.kind);  // a reused slot of a keyed table: fresh slots
    if (table.spec.keyed && slots >= 1) std::fill_n(table.slot0.data() + i * width, width, 0.0f);
    if (table.spec.keyed && slots >= 2) std::fill_n(table.slot1.data() + i * width, width, 0.0f);
    if (config_.kind == OptimizerKind::kAdagrad && !table.slot0.empty())
        std::fill_n(table.slot0.data() + i * width, width, config_.adagrad_initial);
    if (!table.ema.empty()) {  // its average: the initial values, which it has had at every update
        std::memcpy(table.ema.data() + i * width, table.values.data() + i * width, width * sizeof(float));
        table.ema_at.data()[i] = table.updates;
    }
    // An atomic store: a snapshot's reader may read the word's other rows meanwhile (row_snapshot.h).
    std::uint64_t& word = table.created[i >> 6];
    std::atomic_ref<std::uint64_t>(word).store(word | std::uint64_t{1} << (i & 63), std::memory_order_relaxed);
}

void RowStore::materialize(ThreadTeam* team) {
    catch_up_keyed();  // a keyed table has only the rows there are
    for (auto& table : tables_) {
        if (table.spec.keyed) continue;
        // Words of 64 rows per task: parts never share a bitmap word.
        const std::uint64_t words = table.created.size();
        const int parts = (team && table.local_rows >= kParallelInitRows) ? team->size() : 1;
        auto fill = [&](int part) {
            DecayPower power;
            const auto [begin, end] = part_range(words, part, parts);
            for (std::uint64_t w = begin; w < end; ++w)
                for (std::uint64_t i = w * 64; i < std::min(table.local_rows, (w + 1) * 64); ++i) {
                    create(table, i);
                    if (!table.ema.empty()) catch_up(table, i, table.updates, power);
                }
        };
        if (parts == 1) fill(0);
        else team->run(fill);
    }
}

RowStore::BlockSet RowStore::created_blocks(std::size_t t) const {
    static_assert(64 % RowSnapshot::kBlockRows == 0, "a block's created bits lie in one word");
    const Table& table = tables_[t];
    constexpr std::uint64_t kRows = RowSnapshot::kBlockRows, kMask = (std::uint64_t{1} << kRows) - 1;
    const std::uint64_t blocks = (table.local_rows + kRows - 1) / kRows;
    BlockSet out((blocks + 63) / 64, 0);
    for (std::uint64_t b = 0; b < blocks; ++b) {
        std::uint64_t bits = table.created[b * kRows / 64] >> (b * kRows % 64) & kMask;
        if ((b + 1) * kRows > table.local_rows)  // the last block: only its rows' bits
            bits &= (std::uint64_t{1} << (table.local_rows - b * kRows)) - 1;
        if (bits) out[b / 64] |= std::uint64_t{1} << (b % 64);
    }
    return out;
}

std::uint64_t RowStore::rows_created() const {
    std::uint64_t n = 0;
    for (const auto& table : tables_)
        for (std::size_t w = 0; w < table.created.size(); ++w) {
            std::uint64_t word = table.created[w];
            if (w + 1 == table.created.size() && table.local_rows % 64)
                word &= (std::uint64_t{1} << (table.local_rows % 64)) - 1;
            n += static_cast<std::uint64_t>(__builtin_popcountll(word));
        }
    return n;
}

void RowStore::restore(const OptimizerConfig& config) {
    dirty_epoch_ = next_dirty_epoch();  // slots may start afresh: no differential write builds on an older base
    const bool kind_changed = config.kind != config_.kind;
    const bool was_averaging = averaging();
    // Another decay from here on: the updates so far are folded in with the old one first.
    if (was_averaging && config.ema_decay > 0.0f && config.ema_decay != config_.ema_decay) catch_up_all();
    set_config(config);
    for (std::size_t t = 0; t < tables_.size(); ++t) {
        if (kind_changed) reset_slots(t);
        if (!was_averaging || !averaging()) reset_average(t);  // on stays on: kept (WeightAverage::retune)
    }
}

void RowStore::set_config(const OptimizerConfig& config) {
    config_ = config;
    for (auto& table : tables_) table.resolved = config.for_tensor(table.name, 2);
}

void RowStore::begin_update() {
    for (auto& table : tables_) {
        ++table.updates;
        if (!table.index) continue;
        for (const auto& e : table.index->sweep(table.updates)) {  // idle rows (evict_after) let go
            keep_for_snapshot(table, e.slot);
            std::uint64_t& word = table.created[e.slot >> 6];
            std::atomic_ref<std::uint64_t>(word).store(word & ~(std::uint64_t{1} << (e.slot & 63)),
                                                       std::memory_order_relaxed);
        }
    }
    ema_copy_ = !ema_started_;  // the dense average's first update copies (WeightAverage)
    ema_started_ = averaging();
}

void RowStore::apply(std::size_t t, std::span<const std::uint32_t> ids, std::span<const float> grads) {
    auto& table = tables_[t];
    // A table is rank 2 [num_rows, width]; its --param-group's learning rate and decay, if any.
    const UpdateKernel kernel(table.resolved, table.updates, true);
    DecayPower power;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::uint64_t row = table.spec.local_row(ids[i], num_shards_);
        create(table, row);
        update_row(table, row, grads.data() + i * table.spec.width, kernel, power);
    }
}

void RowStore::update_row(Table& table, std::uint64_t i, const float* grad, const UpdateKernel& kernel,
                          DecayPower& power) const {
    keep_for_snapshot(table, i);
    const std::size_t width = table.spec.width, at = i * width;
    if (averaging()) catch_up(table, i, table.updates - 1, power);  // the updates before this one
    kernel(table.values.data() + at, grad, table.slot0.empty() ? nullptr : table.slot0.data() + at,
           table.slot1.empty() ? nullptr : table.slot1.data() + at, width);
    if (averaging()) fold(table, i);
}

void RowStore::gather(std::size_t t, std::span<const std::uint32_t> ids, float* out, bool lookup) {
    auto& table = tables_[t];
    const std::size_t width = table.spec.width;
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::uint64_t row = table.spec.local_row(ids[i], num_shards_);
        if (lookup && !(table.created[row >> 6] >> (row & 63) & 1)) {  // read, not created
            fill_row(table.init, ids[i], std::span<float>(out + i * width, width));
            continue;
        }
        create(table, row);
        std::memcpy(out + i * width, table.values.data() + row * width, width * sizeof(float));
    }
}

void RowStore::apply(std::size_t t, std::span<const std::uint64_t> keys, std::span<const float> grads) {
    auto& table = tables_[t];
    const UpdateKernel kernel(table.resolved, table.updates, true);
    DecayPower power;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        const std::uint32_t slot = table.index->find(keys[i]);
        if (slot == RowIndex::kNone) {  // not admitted (yet), or evicted since it was pulled
            ++table.dropped;
            continue;
        }
        update_row(table, slot, grads.data() + i * table.spec.width, kernel, power);
        table.index->updated(slot, table.updates);
    }
}

void RowStore::gather(std::size_t t, std::span<const std::uint64_t> keys, float* out, bool lookup) {
    auto& table = tables_[t];
    const std::size_t width = table.spec.width;
    for (std::size_t i = 0; i < keys.size(); ++i) {
        RowIndex::Occurrence occurrence;
        if (lookup) occurrence.slot = table.index->find(keys[i]);
        else occurrence = table.index->occur(keys[i], table.updates);
        if (occurrence.slot == RowIndex::kNone) {  // not a row: its initial values, not stored
            fill_row(table.init, keys[i], std::span<float>(out + i * width, width));
            continue;
        }
        if (occurrence.created) create_row(table, occurrence.slot, keys[i]);
        std::memcpy(out + i * width, table.values.data() + std::size_t{occurrence.slot} * width, width * sizeof(float));
    }
}

std::vector<std::span<float>> RowStore::slots(std::size_t t) {
    std::vector<std::span<float>> out;
    const int n = slot_count(config_.kind);
    if (n >= 1) out.emplace_back(tables_[t].slot0.data(), tables_[t].slot0.size());
    if (n >= 2) out.emplace_back(tables_[t].slot1.data(), tables_[t].slot1.size());
    return out;
}

std::vector<std::span<const float>> RowStore::slots(std::size_t t) const {
    std::vector<std::span<const float>> out;
    const int n = slot_count(config_.kind);
    if (n >= 1) out.emplace_back(tables_[t].slot0.data(), tables_[t].slot0.size());
    if (n >= 2) out.emplace_back(tables_[t].slot1.data(), tables_[t].slot1.size());
    return out;
}

std::size_t RowStore::floats() const {
    std::size_t n = 0;
    for (const auto& table : tables_) n += table.values.size();
    return n;
}

std::size_t RowStore::average_floats() const {
    std::size_t n = 0;
    for (const auto& table : tables_) n += table.ema.size();
    return n;
}

std::size_t RowStore::slot_floats() const {
    std::size_t n = 0;
    for (const auto& table : tables_) n += table.slot0.size() + table.slot1.size();
    return n;
}

}  // namespace psrun::psd
