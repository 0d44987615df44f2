// PsClient's payloads (common/payload_codec.h): the one place where the client turns gradients into
// the frames (or shared-memory region) of PUSH/PUSH_PULL and the frames of PARAMS back into
// parameters, in each shard's form: shared memory for the shards that attached its segment
// (common/ps_client_shm.cpp), bf16 frames with --wire-precision bf16, f32 frames otherwise.
// Sealing (--auth mac) happens after, in send_message() (common/ps_client_send.cpp).
#include "common/ps_client.h"
#include "common/zmq_util.h"

namespace psrun {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

float* ParamFrames::spare_at(const ShardLayout& layout, std::uint32_t id) {
    if (spare_.size() != layout.total) spare_.resize(layout.total);
    return spare_.data() + layout.slices[id].flat_offset;
}

PayloadForm PsClient::form_of(std::uint32_t shard) const {
    if (shm_shard_[shard]) return PayloadForm::kShm;
    return options_.wire_bf16 ? PayloadForm::kBf16 : PayloadForm::kF32;
}

void PsClient::send_slices(std::uint32_t shard, Header header, std::span<const float> data, PayloadForm form,
                           std::optional<std::string> body) {
    std::vector<zmq::message_t> payloads;
    if (body) {
        header.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body->size())});
        payloads.emplace_back(body->data(), body->size());
    }
    add_slices(shard, header, payloads, data, form);
    send_message(shard, std::move(header), payloads);
}

void PsClient::add_slices(std::uint32_t shard, Header& header, std::vector<zmq::message_t>& payloads,
                          std::span<const float> data, PayloadForm form) {
    header.flags |= payload_flag(form);
    // bf16 staging: the previous exchange waited for ZeroMQ to release it (wait_released(holds_)).
    if (form == PayloadForm::kBf16 && grad_bf16_.size() != layout_.total) grad_bf16_.resize(layout_.total);
    for (auto id : shard_slices_[shard]) {
        const auto& sl = layout_.slices[id];
        header.frames.push_back(FrameDesc{id, static_cast<std::uint32_t>(sl.length * value_bytes(form))});
        payloads.push_back(encode_frame(data.subspan(sl.flat_offset, sl.length), form,
                                        grad_bf16_.data() + (form == PayloadForm::kBf16 ? sl.flat_offset : 0), holds_));
    }
}

void PsClient::send_exchange(std::uint32_t shard, Header header, std::span<const float> grads) {
    const PayloadForm form = form_of(shard);
    std::vector<zmq::message_t> payloads;
    if (header.type == MessageType::kPull) {  // no dense payload: the flag says which form PARAMS should take
        header.flags |= form == PayloadForm::kShm ? 0 : payload_flag(form);
    } else if (form == PayloadForm::kShm) {
        header.flags |= wire::kFlagShm;
        header.aux = shm_region(shard, grads);
    } else {
        add_slices(shard, header, payloads, grads, form);
    }
    // Sparse rows travel as frames in every form (f32 beside shared memory).
    add_row_frames(shard, header, payloads, form == PayloadForm::kShm ? PayloadForm::kF32 : form);
    send_message(shard, std::move(header), payloads);
}

Result<void> PsClient::take_params(std::uint32_t shard, Reply& reply, ParamFrames& out) {
    const PayloadForm form = payload_form(reply.header.flags);  // psd says which form it sent
    if (shm_shard_[shard]) return take_shm_params(shard, reply, out);
    const auto& ids = shard_slices_[shard];
    if (reply.header.type != MessageType::kParams || form == PayloadForm::kShm ||
        wire::dense_frame_count(reply.header) != ids.size())
        return make_error(ErrorCode::kProtocol, "ps " + std::to_string(shard) + " sent no parameters");
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const std::size_t length = layout_.slices[ids[k]].length;
        if (reply.header.frames[k].id != ids[k] || reply.frames[k].size() != length * value_bytes(form))
            return make_error(ErrorCode::kProtocol, "ps " + std::to_string(shard) + " sent a wrong slice");
        // Kept in out.frames_ (reserved by the caller: never reallocated, so that the data of a small
        // message, which ZeroMQ stores inside the message object, does not move) while used in place.
        const auto& frame = out.frames_.emplace_back(std::move(reply.frames[k]));
        out.by_slice_[ids[k]] = decode_frame(frame, length, form, out.spare_at(layout_, ids[k]));
        if (out.by_slice_[ids[k]].data() != frame.data()) out.frames_.pop_back();
    }
    return {};
}

}  // namespace psrun
