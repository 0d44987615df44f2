// The row frames of a request (sparse tables, docs/protocol.md "Sparse tables"), parsed and
// checked against this shard's tables before anything touches its state: the order (gradient
// pairs by ascending tensor, then pull frames by ascending tensor), the message type, sizes,
// and every id (strictly ascending, below the table's rows, owned by this shard). A pure
// function of its inputs (fuzzed by test/fuzz/row_frames_fuzz.cpp); thread-safe.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include <zmq.hpp>

#include "common/payload_codec.h"
#include "common/result.h"
#include "common/tensor_layout.h"
#include "common/wire.h"

namespace psrun::psd {

struct RowSlice {
    std::uint32_t table = 0;                   // position in layout.tables
    std::span<const std::uint32_t> ids;        // strictly ascending, owned by the shard (empty for a keyed table)
    std::span<const float> values;             // gradients: size() x width floats; pulls: empty
    std::span<const std::uint64_t> keys = {};  // a keyed table's raw ids, as `ids`
    bool lookup = false;                       // pulls: only read, nothing created or admitted (wire::kFlagLookup)
    std::size_t size() const { return keys.empty() ? ids.size() : keys.size(); }
};

struct RowFrames {
    std::vector<RowSlice> grads;  // PUSH/PUSH_PULL
    std::vector<RowSlice> pulls;  // PULL/PUSH_PULL
    bool empty() const { return grads.empty() && pulls.empty(); }
};

// Parses descs/frames (the message's frames after its dense slices, one descriptor per frame)
// as the row frames of a `type` message whose gradient values are in `form` (kShm: f32 frames).
// Ids are used in place when aligned, else copied to `id_spare` (a keyed table's 8-byte ids to
// `key_spare`); values are decoded (common/payload_codec.h) into `value_spare`. The spares may be
// resized; the spans stay valid while the frames and the spares are untouched. kProtocol naming
// the frame, table or id otherwise.
[[nodiscard]] Result<RowFrames> parse_row_frames(
    const ShardLayout& layout, const std::vector<TensorSpec>& tensors, std::uint32_t shard, wire::MessageType type,
    PayloadForm form, std::span<const wire::FrameDesc> descs, std::span<const zmq::message_t> frames,
    std::vector<std::uint32_t>& id_spare, std::vector<std::uint64_t>& key_spare, std::vector<float>& value_spare);

}  // namespace psrun::psd
