#include "common/tensor_layout.h"

#include <algorithm>
#include <bit>

#include "common/fnv1a.h"

namespace psrun {

std::size_t TensorSpec::elements() const {
    std::size_t n = shape.empty() ? 0 : 1;
    for (auto d : shape) n *= d;
    return n;
}

std::string_view to_string(TensorClass c) { return c == TensorClass::kState ? "state" : "trainable"; }
std::string_view to_string(TensorKind k) {
    switch (k) {
        case TensorKind::kDense: return "dense";
        case TensorKind::kRows: return "rows";
        case TensorKind::kKeyedRows: return "keyed rows";
    }
    return "unknown";
}

std::vector<TensorSpec> mnist_deep_tensors() {
    return {
        {"conv1/w", {32, 1, 5, 5}}, {"conv1/b", {32}}, {"conv2/w", {64, 32, 5, 5}}, {"conv2/b", {64}},
        {"fc1/w", {1024, 3136}},    {"fc1/b", {1024}}, {"fc2/w", {10, 1024}},       {"fc2/b", {10}},
    };
}

std::size_t total_elements(const std::vector<TensorSpec>& tensors) {
    std::size_t n = 0;
    for (const auto& t : tensors) n += t.elements();
    return n;
}

std::size_t dense_elements(const std::vector<TensorSpec>& tensors) {
    std::size_t n = 0;
    for (const auto& t : tensors)
        if (!t.rows()) n += t.elements();
    return n;
}

int ShardLayout::table_of(std::uint32_t tensor) const {
    for (std::size_t i = 0; i < tables.size(); ++i)
        if (tables[i].tensor == tensor) return static_cast<int>(i);
    return -1;
}

std::vector<std::uint32_t> ShardLayout::slices_of(std::uint32_t shard) const {
    std::vector<std::uint32_t> ids;
    for (std::uint32_t i = 0; i < slices.size(); ++i)
        if (slices[i].shard == shard) ids.push_back(i);
    return ids;
}

std::size_t ShardLayout::shard_size(std::uint32_t shard) const {
    std::size_t n = 0;
    for (const auto& s : slices)
        if (s.shard == shard) n += s.length;
    return n;
}

namespace {

// compute_layout's planner (see the header): small tables whole, each on the least loaded shard.
void place_tables(ShardLayout& layout) {
    const std::uint32_t k = layout.num_shards;
    if (k < 2) return;
    std::vector<std::uint64_t> load(k, 0);
    for (const auto& s : layout.slices) load[s.shard] += s.length;
    std::uint64_t everything = layout.total;
    for (const auto& t : layout.tables) everything += t.floats();
    const std::uint64_t limit = std::min<std::uint64_t>(kWholeTableFloats, everything / (kWholeTableShare * k));
    std::vector<RowTable*> small;
    for (auto& t : layout.tables) {
        if (t.floats() <= limit) {
            small.push_back(&t);
            continue;
        }
        for (std::uint32_t s = 0; s < k; ++s) load[s] += t.rows_on(s, k) * t.width;
    }
    std::stable_sort(small.begin(), small.end(),
                     [](const RowTable* a, const RowTable* b) { return a->floats() > b->floats(); });
    for (RowTable* t : small) {
        const auto least = static_cast<std::uint32_t>(std::min_element(load.begin(), load.end()) - load.begin());
        t->home = least;
        load[least] += t->floats();
    }
}

}  // namespace

std::optional<RowTable> placement_from_pieces(RowTable table, const std::vector<std::uint64_t>& piece_rows) {
    const auto k = static_cast<std::uint32_t>(piece_rows.size());
    if (k == 0) return std::nullopt;
    table.home = RowTable::kSpread;
    bool spread = true;
    for (std::uint32_t s = 0; s < k; ++s) spread = spread && piece_rows[s] == table.rows_on(s, k);
    if (spread) return table;
    std::uint32_t holders = 0;
    for (std::uint32_t s = 0; s < k; ++s) {
        if (piece_rows[s] == 0) continue;
        if (piece_rows[s] != table.num_rows) return std::nullopt;
        table.home = s;
        ++holders;
    }
    if (holders != 1) return std::nullopt;
    return table;
}

Result<ShardLayout> compute_layout(const std::vector<TensorSpec>& tensors, std::uint32_t num_shards) {
    if (num_shards == 0) return make_error(ErrorCode::kInvalidArgument, "layout needs at least one shard");
    if (tensors.empty()) return make_error(ErrorCode::kInvalidArgument, "layout needs at least one tensor");
    std::vector<std::size_t> starts;  // flat start of each tensor (rows tensors: where they would be, empty)
    std::size_t total = 0;
    std::vector<RowTable> tables;
    for (std::uint32_t i = 0; i < tensors.size(); ++i) {
        const auto& t = tensors[i];
        if (t.elements() == 0)
            return make_error(ErrorCode::kInvalidArgument, "tensor '" + t.name + "' has no elements");
        starts.push_back(total);
        if (t.rows()) {
            if (t.shape.size() != 2)
                return make_error(ErrorCode::kInvalidArgument,
                                  "rows tensor '" + t.name + "' must have shape [num_rows, width]");
            tables.push_back(RowTable{i, t.shape[0], t.shape[1], t.keyed()});
            continue;
        }
        total += t.elements();
    }
    // Ideal byte-balanced boundaries, moved out of small tensors to the nearer tensor edge.
    std::vector<std::size_t> bounds(num_shards + 1);
    for (std::uint32_t s = 0; s <= num_shards; ++s) {
        std::size_t b = static_cast<std::size_t>(static_cast<double>(total) * s / num_shards);
        if (s == num_shards) b = total;
        for (std::size_t t = 0; t < tensors.size(); ++t) {
            if (tensors[t].rows()) continue;
            const std::size_t lo = starts[t], hi = lo + tensors[t].elements();
            if (b > lo && b < hi && hi - lo < kMinSliceFloats) b = (b - lo < hi - b) ? lo : hi;
        }
        bounds[s] = std::max(b, s > 0 ? bounds[s - 1] : 0);
    }
    ShardLayout layout{num_shards, {}, total, std::move(tables)};
    std::uint32_t shard = 0;
    for (std::uint32_t t = 0; t < tensors.size(); ++t) {
        if (tensors[t].rows()) continue;
        std::size_t pos = starts[t];
        const std::size_t end = pos + tensors[t].elements();
        while (pos < end) {
            while (shard + 1 < num_shards && bounds[shard + 1] <= pos) ++shard;
            const std::size_t cut = std::min(end, shard + 1 < num_shards ? bounds[shard + 1] : end);
            layout.slices.push_back(Slice{t, pos - starts[t], cut - pos, shard, pos});
            pos = cut;
        }
    }
    place_tables(layout);
    return layout;
}

Result<void> validate_layout(const ShardLayout& layout, const std::vector<TensorSpec>& tensors) {
    if (layout.num_shards == 0) return make_error(ErrorCode::kProtocol, "layout has zero shards");
    std::size_t flat = 0;
    std::uint32_t tensor = 0;
    std::uint64_t in_tensor = 0;
    std::vector<RowTable> tables;
    for (std::uint32_t i = 0; i < tensors.size(); ++i)
        if (tensors[i].rows() && tensors[i].shape.size() == 2)
            tables.push_back(RowTable{i, tensors[i].shape[0], tensors[i].shape[1], tensors[i].keyed()});
    if (tables.size() != layout.tables.size())
        return make_error(ErrorCode::kProtocol, "layout's sparse tables differ from the tensor list");
    for (std::size_t t = 0; t < tables.size(); ++t) {
        tables[t].home = layout.tables[t].home;
        if (tables[t] != layout.tables[t] || (tables[t].whole() && tables[t].home >= layout.num_shards))
            return make_error(ErrorCode::kProtocol, "layout's sparse tables differ from the tensor list");
    }
    auto skip_rows = [&] {
        while (tensor < tensors.size() && tensors[tensor].rows()) ++tensor;
    };
    skip_rows();
    for (const auto& s : layout.slices) {
        if (tensor >= tensors.size() || s.tensor != tensor || s.offset != in_tensor || s.length == 0 ||
            s.shard >= layout.num_shards || s.flat_offset != flat || s.length > tensors[tensor].elements() - in_tensor)
            return make_error(ErrorCode::kProtocol, "layout slice does not continue the tensor list");
        flat += s.length;
        in_tensor += s.length;
        if (in_tensor == tensors[tensor].elements()) {
            ++tensor;
            in_tensor = 0;
            skip_rows();
        }
    }
    if (tensor != tensors.size() || flat != layout.total || flat != dense_elements(tensors))
        return make_error(ErrorCode::kProtocol, "layout does not cover every tensor");
    return {};
}

std::uint64_t tensors_fingerprint(const std::vector<TensorSpec>& tensors) {
    Fnv1a h(Fnv1a::kLegacyOffset);
    auto mix = [&h](std::uint64_t v) { h.add_u64(v); };
    for (const auto& t : tensors) {
        for (unsigned char c : t.name) mix(c);
        mix(t.shape.size());
        for (auto d : t.shape) mix(d);
        if (t.tensor_class != TensorClass::kTrainable) mix(0x100u | static_cast<std::uint64_t>(t.tensor_class));
        if (t.kind != TensorKind::kDense) {
            mix(0x200u | static_cast<std::uint64_t>(t.kind));
            mix(static_cast<std::uint64_t>(t.row_init.kind));
            mix(std::bit_cast<std::uint32_t>(t.row_init.scale));
            mix(t.row_init.seed);
        }
        if (t.keyed()) {
            mix(t.row_policy.admit_after);
            mix(std::bit_cast<std::uint32_t>(t.row_policy.admit_probability));
            mix(t.row_policy.evict_after);
        }
    }
    return h.value();
}

}  // namespace psrun
