// Shared-memory exchange of ParameterServer (common/shm_segment.h, docs/protocol.md "Shared memory"):
// ATTACH, gradients read from a worker's segment, parameters written into it.
#include <spdlog/spdlog.h>

#include "common/zmq_util.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

using wire::Header;
using wire::MessageType;

namespace {
// More attached segments than this are refused (the client then falls back to payload frames):
// a standby psd must not collect mappings of clients that vanished without DONE.
constexpr std::size_t kMaxAttachments = 256;
}  // namespace

void ParameterServer::on_attach(const std::string& routing, const Header& h, Parts& parts) {
    if (h.frames.size() != 1 || h.frames[0].id != wire::kBodyFrame)
        return reply_error(routing, ErrorCode::kProtocol, "ATTACH carries exactly one body frame");
    auto request = decode_attach(view(parts[2]));
    if (!request) return reply_error(routing, request.error().code, request.error().message);
    if (request->geometry.floats != shard_->layout().total)
        return reply_error(routing, ErrorCode::kInvalidArgument, "ATTACH: the segment does not fit this model");
    if (attached_.size() >= kMaxAttachments && !attached_.contains(routing))
        return reply_error(routing, ErrorCode::kUnsupported, "ATTACH: too many shared-memory clients");
    auto segment = ShmSegment::open(*request);
    if (!segment) {  // another host, another user, or not the sender's file: the client uses frames
        spdlog::info("worker {}: no shared memory ({}), payloads go over the socket", h.index, segment.error().message);
        return reply_error(routing, segment.error().code, segment.error().message);
    }
    attached_.insert_or_assign(routing, std::move(*segment));
    spdlog::debug("worker {} attached shared memory {}", h.index, request->path);
    reply(routing, MessageType::kAck, 0);
}

ShmSegment* ParameterServer::attachment(const std::string& routing) {
    auto it = attached_.find(routing);
    return it == attached_.end() ? nullptr : &it->second;
}

Result<std::vector<std::span<const float>>> ParameterServer::shm_slices(const Header& h, const ShmSegment& seg) {
    if (h.aux >= seg.geometry().regions)
        return make_error(ErrorCode::kProtocol, "gradient region " + std::to_string(h.aux) + " is not in the segment");
    const auto grads = seg.grads(static_cast<std::uint32_t>(h.aux));
    std::vector<std::span<const float>> spans;
    for (auto id : shard_->slice_ids()) {
        const auto& slice = shard_->layout().slices[id];
        spans.push_back(grads.subspan(slice.flat_offset, slice.length));
    }
    return spans;
}

void ParameterServer::reply_params_shm(const std::string& routing, std::uint32_t flags, ShmSegment& seg, bool written,
                                       std::vector<wire::FrameDesc> row_descs, std::vector<zmq::message_t> row_frames) {
    if (!written) shard_->copy_params_to(seg.params(), team_.get());
    reply(routing, MessageType::kParams, flags | wire::kFlagShm, nullptr, std::move(row_descs), std::move(row_frames));
}

}  // namespace psrun::psd
