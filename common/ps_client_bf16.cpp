// PsClient and ParamFrames: the bf16 payload frames of --wire-precision bf16 (common/ps_client.h,
// common/wire_precision.h). The f32 paths are in common/ps_client.cpp.
#include "common/ps_client.h"
#include "common/wire_precision.h"
#include "common/zmq_util.h"

namespace psrun {

const float* ParamFrames::expand_bf16(const ShardLayout& layout, std::uint32_t id, const zmq::message_t& frame) {
    if (expanded_.size() != layout.total) expanded_.resize(layout.total);
    const auto& slice = layout.slices[id];
    const std::span<float> out(expanded_.data() + slice.flat_offset, slice.length);
    wire::bf16_bytes_to_f32(frame.data(), out);  // the caller checked frame.size() == 2 * length
    return out.data();
}

void PsClient::send_slices_bf16(std::uint32_t shard, wire::Header header, std::span<const float> grads) {
    // The previous exchange waited for ZeroMQ to release grad_bf16_ (wait_released(holds_)), so it is free.
    if (grad_bf16_.size() != layout_.total) grad_bf16_.resize(layout_.total);
    std::vector<zmq::message_t> payloads;
    for (auto id : shard_slices_[shard]) {
        const auto& sl = layout_.slices[id];
        std::uint16_t* out = grad_bf16_.data() + sl.flat_offset;
        wire::f32_to_bf16(grads.subspan(sl.flat_offset, sl.length), std::span<std::uint16_t>(out, sl.length));
        const auto bytes = static_cast<std::uint32_t>(sl.length * wire::kBf16Bytes);
        header.frames.push_back(wire::FrameDesc{id, bytes});
        payloads.push_back(zero_copy_message(out, bytes, holds_));
    }
    send_message(shard, std::move(header), payloads);
}

}  // namespace psrun
