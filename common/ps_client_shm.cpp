// PsClient's shared-memory exchange with the psd shards on this host (common/shm_segment.h).
#include <spdlog/spdlog.h>

#include <algorithm>
#include <cstring>

#include "common/ps_client.h"
#include "common/zmq_util.h"

namespace psrun {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

void PsClient::attach_shared_memory() {
    shm_shard_.assign(sockets_.size(), false);
    if (layout_.total == 0) return;  // only sparse tables: their rows always travel as frames
    auto segment = ShmSegment::create(ShmGeometry{layout_.total, options_.shm_regions}, options_.shm_dir);
    if (!segment) {
        spdlog::info("no shared memory with psd ({}): payloads go over the sockets", segment.error().message);
        return;
    }
    const std::string body = encode_attach(segment->attach_request());
    Header h = make_header(MessageType::kAttach);
    h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    for (auto i : all_shards()) send_plain(i, h, &body);
    std::size_t accepted = 0;
    for (auto i : all_shards()) {  // one at a time: a shard on another host refuses, the others still map it
        auto reply = collect({i}, options_.connect_timeout);
        shm_shard_[i] = reply.has_value();
        accepted += shm_shard_[i];
        if (!reply) spdlog::debug("ps {}: {}", i, reply.error().message);
    }
    segment->unlink();  // every shard that wanted it has mapped it: no name is left behind
    if (accepted > 0) shm_ = std::move(*segment);
    spdlog::debug("shared memory with {} of {} psd shards", accepted, sockets_.size());
}

std::size_t PsClient::shm_shards() const {
    return static_cast<std::size_t>(std::count(shm_shard_.begin(), shm_shard_.end(), true));
}

std::span<float> PsClient::gradient_buffer(std::uint32_t region) const {
    if (!shm_.mapped() || region >= shm_.geometry().regions) return {};
    return shm_.grads(region);
}

std::uint32_t PsClient::shm_region(std::uint32_t shard, std::span<const float> grads) {
    std::uint32_t region = 0;
    while (region < shm_.geometry().regions && grads.data() != shm_.grads(region).data()) ++region;
    if (region == shm_.geometry().regions) {  // not computed in place: this shard's slices into region 0
        region = 0;
        float* dst = shm_.grads(0).data();
        for (auto id : shard_slices_[shard]) {
            const auto& s = layout_.slices[id];
            std::memcpy(dst + s.flat_offset, grads.data() + s.flat_offset, s.length * sizeof(float));
        }
    }
    return region;
}

Result<void> PsClient::take_shm_params(std::uint32_t shard, const Reply& reply, ParamFrames& out) const {
    if (reply.header.type != MessageType::kParams || !(reply.header.flags & wire::kFlagShm) ||
        wire::dense_frame_count(reply.header) != 0)
        return make_error(ErrorCode::kProtocol, "ps " + std::to_string(shard) + " sent no parameters");
    const auto params = shm_.params();
    for (auto id : shard_slices_[shard]) {
        const auto& s = layout_.slices[id];
        out.by_slice_[id] = params.subspan(s.flat_offset, s.length);
    }
    return {};
}

}  // namespace psrun
