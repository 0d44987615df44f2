// The model's tensor list and its sharding across K parameter servers.
// Parameters (and gradients) live in one contiguous float buffer, tensors in list order;
// a ShardLayout cuts that buffer into slices and assigns each slice to a shard so that every
// shard holds ~1/K of the bytes. The layout is a pure function of (tensors, K): every worker
// and every psd computes the same one, and psd also sends it in WELCOME.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/result.h"

namespace psrun {

// What updates a tensor. Trainable: the optimizer, from gradients. State (BatchNorm's moving
// mean and variance): no optimizer, slots, learning rate or schedule; the worker sends, in the
// gradient buffer at the tensor's place, the amount to subtract (g = pulled value - new value)
// and the update is params -= g (sync mode: the average of the replicas' g).
enum class TensorClass : std::uint8_t { kTrainable = 0, kState = 1 };
// Where a tensor lives. Dense: in the contiguous buffer every worker holds, sliced over the
// shards. Rows: an embedding table of shape [num_rows, width] that lives only on psd, row r on
// shard r mod K (a small table: whole on one shard, RowTable), pulled and pushed row by row (docs/protocol.md "Sparse
// tables"). Keyed rows: a table keyed by raw 64-bit ids with no vocabulary (docs/sparse.md "Raw ids"), shape [capacity,
// width]: at most `capacity` rows over all shards (ceil(capacity / K) each), id i on shard
// keyed_owner(i, K); a shard makes an id a row when its RowPolicy admits it and evicts rows to
// stay within its capacity (psd/row_index.h). Rows and keyed rows are both rows().
enum class TensorKind : std::uint8_t { kDense = 0, kRows = 1, kKeyedRows = 2 };
std::string_view to_string(TensorClass c);
std::string_view to_string(TensorKind k);

// How psd initialises a rows tensor: element (r, c) is a pure function of (seed, r, c), so
// every shard count gives the same table and no initial values cross the wire.
enum class RowInitKind : std::uint8_t { kZeros = 0, kUniform = 1, kNormal = 2, kTruncatedNormal = 3 };
inline constexpr std::uint8_t kMaxRowInitKind = 3;
struct RowInit {
    RowInitKind kind = RowInitKind::kZeros;
    float scale = 0.0f;      // uniform: U(-scale, scale); (truncated) normal: standard deviation
    std::uint64_t seed = 0;  // the worker derives one per table (two tables with one seed start equal)
    bool operator==(const RowInit&) const = default;
};

// When a keyed table's shard makes an id a row, and when it lets a row go (psd/row_index.h).
// An id that is not a row reads as its initial values (RowInit, by id) and its gradients are
// dropped.
// The longest idle time a policy may give: psd keeps each row's last update to 2^31 updates back.
inline constexpr std::uint64_t kMaxEvictAfter = 1ull << 31;

struct RowPolicy {
    std::uint32_t admit_after = 1;   // occurrences (pulls or pushes) before an id becomes a row: 1..65535
    float admit_probability = 1.0f;  // then the chance per occurrence: (0, 1]
    std::uint64_t evict_after =
        0;  // updates of the shard without a push before a row is evicted: 0 (never)..kMaxEvictAfter
    bool operator==(const RowPolicy&) const = default;
};

struct TensorSpec {
    std::string name;
    std::vector<std::uint32_t> shape;  // rows: {num_rows, width}; keyed rows: {capacity, width}
    TensorClass tensor_class = TensorClass::kTrainable;
    TensorKind kind = TensorKind::kDense;
    RowInit row_init{};      // rows only; must stay default for dense tensors
    RowPolicy row_policy{};  // keyed rows only; must stay default otherwise
    std::size_t elements() const;
    bool state() const { return tensor_class == TensorClass::kState; }
    bool rows() const { return kind != TensorKind::kDense; }
    bool keyed() const { return kind == TensorKind::kKeyedRows; }
    bool operator==(const TensorSpec&) const = default;
};

// TF's mnist_deep CNN: conv1/w [32,1,5,5] ... fc2/b [10]; 3,274,634 floats.
std::vector<TensorSpec> mnist_deep_tensors();
std::size_t total_elements(const std::vector<TensorSpec>& tensors);  // every tensor, rows included
std::size_t dense_elements(const std::vector<TensorSpec>& tensors);  // the dense buffer's floats

// One contiguous run of floats of one tensor, held by one shard.
struct Slice {
    std::uint32_t tensor = 0;  // index into the tensor list
    std::uint64_t offset = 0;  // first element within the tensor
    std::uint64_t length = 0;  // number of floats (> 0)
    std::uint32_t shard = 0;
    std::uint64_t flat_offset = 0;  // first element within the whole contiguous buffer
    bool operator==(const Slice&) const = default;
};

inline std::uint32_t row_owner(std::uint64_t row, std::uint32_t num_shards) {
    return static_cast<std::uint32_t>(row % num_shards);
}
// The shard of raw id `id` of a keyed table: the id mixed (MurmurHash3's finaliser) before the
// modulus, because raw ids (hashes with fixed low bits, counters, timestamps) are rarely uniform
// mod K.
inline std::uint32_t keyed_owner(std::uint64_t id, std::uint32_t num_shards) {
    id ^= id >> 33;
    id *= 0xff51afd7ed558ccdULL;
    id ^= id >> 33;
    id *= 0xc4ceb9fe1a85ec53ULL;
    id ^= id >> 33;
    return static_cast<std::uint32_t>(id % num_shards);
}
inline std::uint64_t row_index(std::uint64_t row, std::uint32_t num_shards) { return row / num_shards; }

// A rows tensor (sparse table) and where its rows live. Spread (large tables): row r on shard
// r mod K, at index r / K of that shard's part (rows r = shard, shard + K, shard + 2K, ... in
// ascending order); a keyed table's id i on shard keyed_owner(i, K), at a slot of that shard's
// rows_on() its index assigns. Whole (small tables, compute_layout's planner): every row on shard
// `home`, row r at index r (a keyed table: all its capacity there); the other shards hold none.
struct RowTable {
    static constexpr std::uint32_t kSpread = 0xFFFFFFFFu;
    std::uint32_t tensor = 0;      // index into the tensor list
    std::uint64_t num_rows = 0;    // rows; ids are 0 .. num_rows - 1 (keyed: the capacity, ids any uint64)
    std::uint32_t width = 0;       // floats per row
    bool keyed = false;            // TensorKind::kKeyedRows
    std::uint32_t home = kSpread;  // the shard holding the whole table, or kSpread

    bool whole() const { return home != kSpread; }
    // The shard of row (or keyed id) `id`.
    std::uint32_t owner(std::uint64_t id, std::uint32_t num_shards) const {
        if (whole()) return home;
        return keyed ? keyed_owner(id, num_shards) : row_owner(id, num_shards);
    }
    // A vocabulary table's row `row` at its owner: the local index, and back.
    std::uint64_t local_row(std::uint64_t row, std::uint32_t num_shards) const {
        return whole() ? row : row_index(row, num_shards);
    }
    std::uint64_t global_row(std::uint64_t local, std::uint32_t shard, std::uint32_t num_shards) const {
        return whole() ? local : local * num_shards + shard;
    }
    // Rows `shard` of `num_shards` holds (keyed: at most, its slots).
    std::uint64_t rows_on(std::uint32_t shard, std::uint32_t num_shards) const {
        if (whole()) return shard == home ? num_rows : 0;
        if (keyed) return (num_rows + num_shards - 1) / num_shards;
        return num_rows > shard ? (num_rows - shard + num_shards - 1) / num_shards : 0;
    }
    std::uint64_t floats() const { return num_rows * width; }
    bool operator==(const RowTable&) const = default;
};

// How a checkpoint's pieces of `table` were placed, from the rows of each (piece_rows[s]: shard s
// of piece_rows.size()): spread when every piece has its spread share (pieces written before
// placements existed are all spread), else whole on the one piece that holds every row when the
// others hold none; nullopt when neither fits (a piece of another model).
std::optional<RowTable> placement_from_pieces(RowTable table, const std::vector<std::uint64_t>& piece_rows);

struct ShardLayout {
    std::uint32_t num_shards = 0;
    std::vector<Slice> slices;     // in flat-buffer order; ids are indices into this vector
    std::size_t total = 0;         // floats in the whole (dense) buffer
    std::vector<RowTable> tables;  // the rows tensors, in list order; not in the buffer

    // Position in `tables` of tensor `tensor`, or -1 when it is not a rows tensor.
    int table_of(std::uint32_t tensor) const;

    // Slice ids held by `shard`, ascending.
    std::vector<std::uint32_t> slices_of(std::uint32_t shard) const;
    std::size_t shard_size(std::uint32_t shard) const;  // floats held by `shard`
    bool operator==(const ShardLayout&) const = default;
};

// Greedy contiguous split of the dense tensors: shard s receives flat range [s*T/K, (s+1)*T/K),
// rounded so that a tensor smaller than kMinSliceFloats is never cut; rows tensors (keyed ones
// too) go to `tables`. With K > 1 the planner places each small table whole on one shard: at
// most kWholeTableFloats (rows x width; keyed: capacity x width) and at most
// 1/(kWholeTableShare K) of all the floats the shards hold (dense and rows), so that whole tables
// can balance (a table that is most of the model stays spread). Largest first, each goes to the
// shard holding the fewest floats so far (dense slices, the spread tables' shares, the whole
// tables placed before it; ties to the lowest index): a small table's lookups then reach one
// shard, and a small keyed table keeps its whole capacity in one place instead of K
// hash-balanced shares. Bytes stand for lookups: a table's distinct ids per batch are at most its
// rows. REQUIRES nothing: errors on K == 0, an empty list, or a tensor with zero elements.
inline constexpr std::size_t kMinSliceFloats = 4096;
inline constexpr std::uint64_t kWholeTableFloats = std::uint64_t{1} << 20;  // 4 MiB of values
inline constexpr std::uint64_t kWholeTableShare = 4;
[[nodiscard]] Result<ShardLayout> compute_layout(const std::vector<TensorSpec>& tensors, std::uint32_t num_shards);

// Checks that a layout received from a peer is well-formed for `tensors`: slices cover each
// dense tensor exactly once, in order, with shard ids < num_shards, and `tables` lists the rows
// tensors with their shapes and the planner's placement.
[[nodiscard]] Result<void> validate_layout(const ShardLayout& layout, const std::vector<TensorSpec>& tensors);

// A stable 64-bit fingerprint of the tensor list (names, shapes, and class, kind, row
// initializer and keyed rows' policy where they differ from the defaults, so that lists of plain trainable dense
// tensors keep the fingerprints they had before those fields existed), used in shard files.
std::uint64_t tensors_fingerprint(const std::vector<TensorSpec>& tensors);

}  // namespace psrun
