// libFuzzer target for psd's sparse message path: the row frames of PULL/PUSH/PUSH_PULL
// (psd/row_frames.h), as psd parses them after the header and the dense slices. Input:
//   shard: u8, shards: u8 (1..4 used), type: u8, form: u8, then frames: (id: u8 or, when its
//   top bit is set, a raw u32 follows), (length: u16), (bytes[length])
// Invariants on success: every id below its table's rows (a keyed table: any uint64), owned by the
// shard (RowTable::owner: spread, or a small table whole on its home shard), strictly ascending;
// gradient values exactly ids x width floats.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <vector>

#include "psd/row_frames.h"

namespace {

const std::vector<psrun::TensorSpec>& tensors() {
    static const std::vector<psrun::TensorSpec> t = [] {
        std::vector<psrun::TensorSpec> v = {
            {"w", {4, 4}}, {"emb", {1000, 3}}, {"raw", {64, 2}}, {"tok", {37, 1}}, {"b", {4}}};
        v[1].kind = psrun::TensorKind::kRows;
        v[2].kind = psrun::TensorKind::kKeyedRows;  // 8-byte raw ids
        v[3].kind = psrun::TensorKind::kRows;
        return v;
    }();
    return t;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
    using namespace psrun;
    if (size < 4) return 0;
    const std::uint32_t shards = 1 + data[1] % 4, shard = data[0] % shards;
    const wire::MessageType types[] = {wire::MessageType::kPull, wire::MessageType::kPush, wire::MessageType::kPushPull,
                                       wire::MessageType::kInit};
    const auto type = types[data[2] % 4];
    const PayloadForm forms[] = {PayloadForm::kF32, PayloadForm::kBf16, PayloadForm::kShm};
    const auto form = forms[data[3] % 3];
    static const auto layout = [] {
        std::vector<ShardLayout> v;
        for (std::uint32_t k = 1; k <= 4; ++k) v.push_back(*compute_layout(tensors(), k));
        return v;
    }();
    std::vector<wire::FrameDesc> descs;
    std::vector<zmq::message_t> frames;
    std::size_t at = 4;
    while (at < size && descs.size() < 64) {
        std::uint32_t id = data[at++];
        if (id & 0x80) {
            if (size - at < 4) break;
            std::memcpy(&id, data + at, 4);
            at += 4;
        } else {
            id = wire::row_frame_id(static_cast<wire::RowPart>(id & 3), (id >> 2) & 3);
        }
        if (size - at < 2) break;
        std::uint16_t length = 0;
        std::memcpy(&length, data + at, 2);
        at += 2;
        length = static_cast<std::uint16_t>(std::min<std::size_t>(length, size - at));
        descs.push_back(wire::FrameDesc{id, length});
        frames.emplace_back(data + at, length);  // a copy: the frame's alignment is ZeroMQ's
        at += length;
    }
    std::vector<std::uint32_t> id_spare;
    std::vector<std::uint64_t> key_spare;
    std::vector<float> value_spare;
    const auto& l = layout[shards - 1];
    auto rows = psd::parse_row_frames(l, tensors(), shard, type, form, descs, frames, id_spare, key_spare, value_spare);
    if (!rows) return 0;
    for (const auto* list : {&rows->grads, &rows->pulls})
        for (const auto& r : *list) {
            if (r.table >= l.tables.size() || r.size() == 0) __builtin_trap();
            const auto& table = l.tables[r.table];
            if (table.keyed != !r.keys.empty() || (!r.keys.empty() && !r.ids.empty())) __builtin_trap();
            for (std::size_t i = 0; i < r.ids.size(); ++i) {
                if (r.ids[i] >= table.num_rows || table.owner(r.ids[i], shards) != shard) __builtin_trap();
                if (i > 0 && r.ids[i] <= r.ids[i - 1]) __builtin_trap();
            }
            for (std::size_t i = 0; i < r.keys.size(); ++i) {
                if (table.owner(r.keys[i], shards) != shard) __builtin_trap();
                if (i > 0 && r.keys[i] <= r.keys[i - 1]) __builtin_trap();
            }
            if (list == &rows->grads && r.values.size() != r.size() * table.width) __builtin_trap();
            if (list == &rows->pulls && !r.values.empty()) __builtin_trap();
            volatile float sink = 0;
            for (float v : r.values) sink = sink + v;  // every value is readable
        }
    return 0;
}
