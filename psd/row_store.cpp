#include "psd/row_store.h"

#include <cstring>

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
        table.local_rows = t.rows_on(shard, num_shards_);
        tables_.push_back(std::move(table));
    }
}

void RowStore::allocate(const OptimizerConfig& config) {
    config_ = config;
    for (std::size_t t = 0; t < tables_.size(); ++t) {
        auto& table = tables_[t];
        const std::size_t n = table.local_rows * table.spec.width;
        if (table.values.size() != n) {
            table.values.clear();
            table.values.shrink_to_fit();  // never two copies of a table at once
            table.values.resize(n);
        }
        reset_slots(t);
        table.updates = 0;
    }
}

void RowStore::reset_slots(std::size_t t) {
    auto& table = tables_[t];
    const std::size_t n = table.local_rows * table.spec.width;
    const int slots = slot_count(config_.kind);
    const float init = config_.kind == OptimizerKind::kAdagrad ? config_.adagrad_initial : 0.0f;
    table.slot0.clear();
    table.slot0.shrink_to_fit();
    table.slot1.clear();
    table.slot1.shrink_to_fit();
    if (slots >= 1) table.slot0.assign(n, init);
    if (slots >= 2) table.slot1.assign(n, 0.0f);
}

void RowStore::init(const OptimizerConfig& config, ThreadTeam* team) {
    allocate(config);
    for (auto& table : tables_) {
        const std::uint32_t width = table.spec.width;
        const int parts = (team && table.local_rows >= kParallelInitRows) ? team->size() : 1;
        auto fill = [&](int part) {
            const auto [begin, end] = part_range(table.local_rows, part, parts);
            for (std::uint64_t i = begin; i < end; ++i)
                fill_row(table.init, i * num_shards_ + shard_, std::span<float>(table.values.data() + i * width, width));
        };
        if (parts == 1) fill(0);
        else team->run(fill);
    }
}

void RowStore::restore(const OptimizerConfig& config) {
    const bool kind_changed = config.kind != config_.kind;
    config_ = config;
    if (kind_changed)
        for (std::size_t t = 0; t < tables_.size(); ++t) reset_slots(t);
}

void RowStore::begin_update() {
    for (auto& table : tables_) ++table.updates;
}

void RowStore::apply(std::size_t t, std::span<const std::uint32_t> ids, std::span<const float> grads) {
    auto& table = tables_[t];
    const std::size_t width = table.spec.width;
    const UpdateKernel kernel(config_, table.updates);
    float* s0 = table.slot0.empty() ? nullptr : table.slot0.data();
    float* s1 = table.slot1.empty() ? nullptr : table.slot1.data();
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const std::size_t at = row_index(ids[i], num_shards_) * width;
        kernel(table.values.data() + at, grads.data() + i * width, s0 ? s0 + at : nullptr, s1 ? s1 + at : nullptr, width);
    }
}

void RowStore::gather(std::size_t t, std::span<const std::uint32_t> ids, float* out) const {
    const auto& table = tables_[t];
    const std::size_t width = table.spec.width;
    for (std::size_t i = 0; i < ids.size(); ++i)
        std::memcpy(out + i * width, table.values.data() + row_index(ids[i], num_shards_) * width, width * sizeof(float));
}

std::vector<std::span<float>> RowStore::slots(std::size_t t) {
    std::vector<std::span<float>> out;
    const int n = slot_count(config_.kind);
    if (n >= 1) out.emplace_back(tables_[t].slot0);
    if (n >= 2) out.emplace_back(tables_[t].slot1);
    return out;
}

std::vector<std::span<const float>> RowStore::slots(std::size_t t) const {
    std::vector<std::span<const float>> out;
    const int n = slot_count(config_.kind);
    if (n >= 1) out.emplace_back(tables_[t].slot0);
    if (n >= 2) out.emplace_back(tables_[t].slot1);
    return out;
}

std::size_t RowStore::floats() const {
    std::size_t n = 0;
    for (const auto& table : tables_) n += table.values.size();
    return n;
}

std::size_t RowStore::slot_floats() const {
    std::size_t n = 0;
    for (const auto& table : tables_) n += table.slot0.size() + table.slot1.size();
    return n;
}

}  // namespace psrun::psd
