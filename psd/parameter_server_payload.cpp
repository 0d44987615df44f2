// ParameterServer's payloads (common/payload_codec.h): the one place where psd turns the frames (or
// the sender's shared-memory region) of INIT, PUSH and PUSH_PULL into float spans, and its slices
// into the frames (or region) of PARAMS, in the form the request announced: shared memory
// (psd/parameter_server_shm.cpp), bf16 frames (psd/bf16_params.h keeps the converted copy) or f32
// frames. Sealing (--auth mac) happens after, in send_reply() (psd/parameter_server_replies.cpp).
#include <spdlog/spdlog.h>

#include "common/zmq_util.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

Result<std::vector<std::span<const float>>> ParameterServer::decode_slices(const Header& h, Parts& parts,
                                                                           std::size_t first, PayloadForm form,
                                                                           const ShmSegment* segment) {
    if (form == PayloadForm::kShm) {
        auto spans = shm_slices(h, *segment);
        if (!spans) return spans;
        if (auto ok = check_finite(*spans); !ok) return tl::unexpected(ok.error());
        return spans;
    }
    const auto& ids = shard_->slice_ids();
    if (h.frames.size() != first + ids.size())
        return make_error(ErrorCode::kProtocol, "expected " + std::to_string(ids.size()) + " slice frames");
    if (payload_spare_.size() != shard_->size()) payload_spare_.resize(shard_->size());
    std::vector<std::span<const float>> spans;
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const auto& d = h.frames[first + k];
        const std::size_t length = shard_->layout().slices[ids[k]].length;
        const auto& frame = parts[2 + first + k];
        if (d.id != ids[k] || (form == PayloadForm::kF32 && d.bytes != length * sizeof(float)))
            return make_error(ErrorCode::kProtocol, "frame " + std::to_string(first + k) + " is not slice " +
                                                        std::to_string(ids[k]) + " of this shard");
        if (d.bytes != length * value_bytes(form))
            return make_error(ErrorCode::kProtocol,
                              "bf16 gradient frame " + std::to_string(k) + " (slice " + std::to_string(ids[k]) + ") has " +
                                  std::to_string(frame.size()) + " bytes; its " + std::to_string(length) +
                                  " values take exactly " + std::to_string(length * value_bytes(form)) +
                                  " bytes in bf16");
        spans.push_back(decode_frame(frame, length, form, payload_spare_.data() + shard_->local_offset(k)));
    }
    if (auto ok = check_finite(spans); !ok) return tl::unexpected(ok.error());
    return spans;
}

void ParameterServer::reply_params(const std::string& routing, std::uint32_t flags, bool written) {
    flags |= take_rejoined(routing);
    if (ShmSegment* segment = attachment(routing))
        return reply_params_shm(routing, flags & ~wire::kFlagBf16, *segment, written);
    const PayloadForm form = payload_form(flags);
    Header h;
    h.type = MessageType::kParams;
    h.role = wire::Role::kPs;
    h.token = options_.token;
    h.index = options_.index;
    h.flags = flags;
    if (h.flags & wire::kFlagRejoined) h.aux = static_cast<std::uint64_t>(options_.worker_timeout.count());
    h.step = shard_->step();
    const auto& ids = shard_->slice_ids();
    std::vector<zmq::message_t> payloads;
    // bf16: one converted copy per parameter version, shared by every reply of that version.
    auto* bf16 = form == PayloadForm::kBf16 ? &bf16_.params(*shard_, team_.get()) : nullptr;
    auto& buffer = shard_->current();
    for (std::size_t k = 0; k < ids.size(); ++k) {
        const std::size_t length = shard_->layout().slices[ids[k]].length;
        h.frames.push_back(FrameDesc{ids[k], static_cast<std::uint32_t>(length * value_bytes(form))});
        if (bf16)
            payloads.push_back(encode_staged_bf16(
                std::span<const std::uint16_t>(bf16->data.data() + shard_->local_offset(k), length), bf16->holds));
        else
            payloads.push_back(encode_frame(std::span<const float>(buffer.data.data() + shard_->local_offset(k), length),
                                            PayloadForm::kF32, nullptr, buffer.holds));
    }
    send_reply(routing, h, payloads);
}

}  // namespace psrun::psd
