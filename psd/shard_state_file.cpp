// ShardState's standby shard file (psd/shard_state.h save/load): a tensor file (common/tensor_file.h,
// CRC-32C per tensor) holding, in order,
//   "meta"                       version, shard, shards, fingerprint, step, update count, floats,
//                                then the INIT body (wire::encode_init) one byte per float
//   "slice<id>/param", "slice<id>/slot<j>"   for each own slice (no slots for a state tensor),
//   "slice<id>/ema"                          and its moving average (--ema-decay; version 7)
//   "rows<t>/param", "rows<t>/slot<j>", "rows<t>/ema", "rows<t>/state"   for each sparse table t:
//                                this shard's rows, their slots, their moving average (--ema-decay,
//                                version 8; current at the update count: saved after materialize())
//                                and the table's update count
//   "data_chunks/header", "data_chunks/closed", "data_chunks/open"   psd 0's data dispenser, when it
//                                has one (version 9): the tensors of <ckpt>/data-chunks.tensors
//                                (psd/data_chunks_file.h), so a run resumed from this file alone goes
//                                on with the dispenser's epoch and chunks
// Integers are stored as four base-2^16 digits (exact in float32). The file is written and read
// as a stream (common/tensor_file_stream.h): a sparse table is never copied whole in memory.
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "common/tensor_file.h"
#include "common/tensor_file_stream.h"
#include "psd/data_chunks_file.h"
#include "psd/shard_checkpoint_rows.h"
#include "psd/shard_state.h"
#include "psd/torn_guard.h"

namespace psrun::psd {
namespace {

// 3: the optimizer config holds the learning-rate decay; 4: and schedule; 5: sparse tables (a version 4
// file, which has none, still loads into a model without sparse tables); 6: weight decay and clipping
// at the INIT body's end (a version 4 or 5 file loads as no decay, no clipping); 7: the moving
// average's decay and the parameter groups at the INIT body's end, and each slice's average (older
// files: no average, no groups); 8: the sparse tables' rows' average (a version 7 file loads with
// the rows' average restarted from the rows); 9: psd 0's data dispenser at the end, when it has one
// (an older file loads with none: the data starts at epoch 0); 10: a keyed table's id map
// ("rows<t>/keys") after its state
constexpr std::uint32_t kShardFileVersion = 10;
// The INIT fields protocol 10 added (wire_bodies.cpp: weight decay f32, its selection u8, the
// clipping norm f32), all zero: what a version 4 or 5 file's body lacks.
constexpr std::size_t kInitV10Bytes = 4 + 1 + 4;
// The INIT fields protocol 11 added (ema_decay f32, the parameter group count u16), zero: what a
// version 4 to 6 file's body lacks.
constexpr std::size_t kInitV11Bytes = 4 + 2;

void put_u64(std::vector<float>& out, std::uint64_t v) {
    for (int i = 0; i < 4; ++i) out.push_back(static_cast<float>((v >> (16 * i)) & 0xFFFF));
}

std::uint64_t get_u64(std::span<const float> in, std::size_t& at) {
    std::uint64_t v = 0;
    for (int i = 0; i < 4; ++i) v |= static_cast<std::uint64_t>(in[at++]) << (16 * i);
    return v;
}

}  // namespace

Result<void> ShardState::save(const std::string& path, const DataChunks* chunks) const {
    const auto& params = buffers_[current_]->data;
    if (!wire::all_finite(params.data(), params.size()))
        return make_error(ErrorCode::kInvalidArgument,
                          "refusing to write shard file " + path + ": the parameters contain NaN or Inf");
    for (std::size_t t = 0; t < rows_.size(); ++t)
        if (!wire::all_finite(rows_.values(t).data(), rows_.values(t).size()))
            return make_error(ErrorCode::kInvalidArgument, "refusing to write shard file " + path + ": sparse table '" +
                                                               tensors_.at(rows_.table(t).tensor).name +
                                                               "' contains NaN or Inf");
    std::vector<float> meta;
    meta.push_back(static_cast<float>(kShardFileVersion));
    put_u64(meta, shard_);
    put_u64(meta, layout_.num_shards);
    put_u64(meta, fingerprint_);
    put_u64(meta, step_);
    put_u64(meta, optimizers_.empty() ? 0 : optimizers_[0].updates());
    put_u64(meta, size_);
    const std::string init = wire::encode_init(config_);  // bytes as floats 0..255
    for (char c : init) meta.push_back(static_cast<float>(static_cast<unsigned char>(c)));
    std::vector<TensorView> views{TensorView{"meta", {meta.size()}, meta}};
    for (std::size_t k = 0; k < slice_ids_.size(); ++k) {
        const std::string base = "slice" + std::to_string(slice_ids_[k]);
        views.push_back(TensorView{base + "/param", {layout_.slices[slice_ids_[k]].length}, param_slice(k)});
        auto slots = slot_slices(k);
        for (std::size_t j = 0; j < slots.size(); ++j)
            views.push_back(TensorView{base + "/slot" + std::to_string(j), {slots[j].size()}, slots[j]});
        if (auto ema = average_.slice(k); !ema.empty()) views.push_back(TensorView{base + "/ema", {ema.size()}, ema});
    }
    std::vector<std::vector<float>> row_states(rows_.size()), row_keys(rows_.size());
    for (std::size_t t = 0; t < rows_.size(); ++t) {
        const std::string base = "rows" + std::to_string(t);
        const std::vector<std::uint64_t> shape{rows_.local_rows(t), rows_.table(t).width};
        views.push_back(TensorView{base + "/param", shape, rows_.values(t)});
        auto slots = rows_.slots(t);
        for (std::size_t j = 0; j < slots.size(); ++j)
            views.push_back(TensorView{base + "/slot" + std::to_string(j), shape, slots[j]});
        if (auto ema = rows_.average(t); !ema.empty()) views.push_back(TensorView{base + "/ema", shape, ema});
        put_u64(row_states[t], rows_.updates(t));
        views.push_back(TensorView{base + "/state", {4}, row_states[t]});
        if (rows_.table(t).keyed) {  // a keyed table: which id each slot holds (version 10)
            const RowIndex* index = rows_.index(t);
            const auto entries = index ? index->entries() : std::vector<RowIndex::Entry>{};
            row_keys[t] = encode_keyed_entries(entries);
            views.push_back(TensorView{base + "/keys", {entries.size(), kKeyedEntryFloats}, row_keys[t]});
        }
    }
    const std::vector<NamedTensor> dispenser =
        chunks ? data_chunks_tensors(chunks->state()) : std::vector<NamedTensor>();
    for (const NamedTensor& t : dispenser) views.push_back(TensorView{t.name, t.shape, t.data});
    const std::string tmp = path + ".tmp";
    if (auto ok = write_tensor_file(tmp, views); !ok) return ok;
    if (std::rename(tmp.c_str(), path.c_str()) != 0) {
        std::remove(tmp.c_str());
        return make_error(ErrorCode::kIo, "cannot write shard file " + path);
    }
    return {};
}

Result<void> ShardState::load(const std::string& path, std::optional<DataChunks>* chunks) {
    if (!std::filesystem::exists(path)) return make_error(ErrorCode::kNotFound, "no shard file " + path);
    auto file = TensorFileReader::open(path);  // every CRC checked, in constant memory
    if (!file) return make_error(file.error().code, "shard file " + file.error().message);
    auto corrupt = [&](const std::string& what) {
        return make_error(ErrorCode::kInvalidArgument, "shard file " + path + ": " + what);
    };
    const auto& entries = file->tensors();
    const std::size_t init_size = wire::encode_init(wire::InitConfig{}).size();  // the smallest: constant schedule
    if (entries.empty() || entries[0].name != "meta" ||
        entries[0].count < 1 + 6 * 4 + init_size - kInitV10Bytes - kInitV11Bytes ||
        entries[0].count > 1 + 6 * 4 + wire::kMaxBodyBytes)
        return corrupt("not a psrun shard file");
    std::vector<float> meta(entries[0].count);
    PSRUN_TRY(file->read(0, 0, meta));
    std::size_t at = 1;
    const auto version = meta[0];
    const auto shard = get_u64(meta, at), shards = get_u64(meta, at), fingerprint = get_u64(meta, at),
               step = get_u64(meta, at), updates = get_u64(meta, at), size = get_u64(meta, at);
    const bool known = version == static_cast<float>(kShardFileVersion) || version == 9.0f || version == 8.0f ||
                       version == 7.0f || version == 6.0f || version == 5.0f || (version == 4.0f && rows_.size() == 0);
    if (!known || shard != shard_ || shards != layout_.num_shards || fingerprint != fingerprint_ || size != size_)
        return corrupt("written for another model, shard or shard count");
    std::string init;
    for (; at < meta.size(); ++at) init.push_back(static_cast<char>(static_cast<unsigned char>(meta[at])));
    if (version < 6.0f) init.append(kInitV10Bytes, '\0');
    if (version < 7.0f) init.append(kInitV11Bytes, '\0');
    auto config = wire::decode_init(init);
    if (!config) return corrupt("bad optimizer config");
    const std::size_t slots = static_cast<std::size_t>(slot_count(config->optimizer.kind));
    const std::size_t averages = config->optimizer.ema_decay > 0.0f ? 1 : 0;  // entries per slice
    std::size_t expected = 1;
    for (std::size_t k = 0; k < slice_ids_.size(); ++k) expected += 1 + (state_[k] ? 0 : slots) + averages;
    const std::size_t row_averages = averages && version >= 8.0f ? 1 : 0;  // entries per table
    expected += rows_.size() * (2 + slots + row_averages);
    for (std::size_t t = 0; t < rows_.size(); ++t) expected += rows_.table(t).keyed ? 1 : 0;  // its id map
    const bool has_dispenser = version >= 9.0f && entries.size() == expected + kDataChunksTensors &&
                               is_data_chunks_header(entries[expected].name);
    if (entries.size() != expected && !has_dispenser) return corrupt("wrong number of tensors");
    std::size_t next = 1;
    std::vector<std::vector<RowIndex::Entry>> keyed_entries(rows_.size());  // keyed tables' id maps, checked
    for (std::size_t k = 0; k < slice_ids_.size(); ++k)
        for (std::size_t j = 0; j <= (state_[k] ? 0 : slots) + averages; ++j, ++next)
            if (entries[next].count != layout_.slices[slice_ids_[k]].length) return corrupt("wrong data size");
    for (std::size_t t = 0; t < rows_.size(); ++t) {
        for (std::size_t j = 0; j <= slots + row_averages; ++j, ++next)
            if (entries[next].count != rows_.local_rows(t) * rows_.table(t).width) return corrupt("wrong table size");
        if (entries[next++].count != 4) return corrupt("wrong table state size");
        if (!rows_.table(t).keyed) continue;
        std::vector<float> digits(entries[next].count);
        PSRUN_TRY(file->read(next, 0, digits));
        PSRUN_TRY_ASSIGN(auto decoded, decode_keyed_entries(digits, rows_.local_rows(t), "shard file " + path));
        keyed_entries[t] = std::move(decoded);
        ++next;
    }
    std::optional<DataChunks> dispenser;
    if (has_dispenser) {  // small: read whole and checked like a checkpoint's data-chunks.tensors
        std::vector<NamedTensor> tensors;
        for (std::size_t i = expected; i < entries.size(); ++i) {
            tensors.push_back(NamedTensor{entries[i].name, entries[i].shape, std::vector<float>(entries[i].count)});
            PSRUN_TRY(file->read(i, 0, tensors.back().data));
        }
        auto state = decode_data_chunks_tensors(tensors, path);
        if (!state) return make_error(ErrorCode::kInvalidArgument, "shard file " + state.error().message);
        auto restored = DataChunks::restore(*state);
        if (!restored) return make_error(ErrorCode::kInvalidArgument, "shard file " + restored.error().message);
        dispenser = std::move(*restored);
    }
    // Checked: now replace the state (a read error from here on leaves the shard uninitialised).
    const TornGuard guard(torn_);
    config_ = *config;
    initialized_ = false;
    float* dst = writable();
    make_optimizers();
    rows_.allocate(config_.optimizer);
    std::vector<std::vector<float>> average(averages ? slice_ids_.size() : 0);
    Result<void> ok;
    next = 1;
    for (std::size_t k = 0; ok && k < slice_ids_.size(); ++k) {
        ok = file->read(next++, 0, std::span<float>(dst + local_offsets_[k], layout_.slices[slice_ids_[k]].length));
        optimizers_[k].set_updates(updates);
        for (auto s : optimizers_[k].slots())
            if (ok) ok = file->read(next++, 0, s);
        if (averages) average[k].resize(layout_.slices[slice_ids_[k]].length);
        if (ok && averages) ok = file->read(next++, 0, average[k]);
    }
    if (ok) average_.set(config_.optimizer.ema_decay, std::move(average));
    for (std::size_t t = 0; ok && t < rows_.size(); ++t) {
        ok = file->read(next++, 0, rows_.values(t));
        for (auto s : rows_.slots(t))
            if (ok) ok = file->read(next++, 0, s);
        if (ok && row_averages) ok = file->read(next++, 0, rows_.average(t));
        std::vector<float> state(4);
        if (ok) ok = file->read(next++, 0, state);
        std::size_t pos = 0;
        rows_.set_updates(t, get_u64(state, pos));
        if (rows_.table(t).keyed) {
            rows_.restore_index(t, keyed_entries[t]);
            ++next;
        }
        rows_.start_average(t, row_averages != 0);  // a version 7 file's: restarted from the rows
    }
    if (!ok) return tl::unexpected(ok.error());
    step_ = step;
    last_step_ = config_.last_step;
    initialized_ = true;
    if (chunks) *chunks = std::move(dispenser);
    return {};
}

}  // namespace psrun::psd
