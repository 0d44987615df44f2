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
    const auto& ids = shard_slices_[shard];
    for (auto id : ids)
        header.frames.push_back(
            wire::FrameDesc{id, static_cast<std::uint32_t>(layout_.slices[id].length * wire::kBf16Bytes)});
    const std::string bytes = wire::encode_header(header);
    auto& s = sockets_[shard];
    s.send(zmq::buffer(bytes), ids.empty() ? zmq::send_flags::none : zmq::send_flags::sndmore);
    for (std::size_t i = 0; i < ids.size(); ++i) {
        const auto& sl = layout_.slices[ids[i]];
        std::uint16_t* out = grad_bf16_.data() + sl.flat_offset;
        wire::f32_to_bf16(grads.subspan(sl.flat_offset, sl.length), std::span<std::uint16_t>(out, sl.length));
        s.send(zero_copy_message(out, sl.length * wire::kBf16Bytes, holds_),
               i + 1 < ids.size() ? zmq::send_flags::sndmore : zmq::send_flags::none);
    }
}

}  // namespace psrun
