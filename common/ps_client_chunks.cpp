// PsClient::chunk (docs/protocol.md "Elastic data"): one CHUNK request to psd 0; PsClient::join
// (docs/protocol.md "Joining"): one JOIN request to psd 0.
#include "common/ps_client.h"
#include "common/zmq_util.h"

namespace psrun {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

Result<wire::ChunkGrant> PsClient::chunk(const wire::ChunkRequest& request) {
    Header h = make_header(MessageType::kChunk);
    const std::string body = wire::encode_chunk_request(request);
    h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    send_plain(0, h, &body);
    // A psd lost and back (the same process) gets the request again: a chunk leased by the lost
    // reply stays with this worker until its DONE, which returns it to the queue.
    auto replies = collect({0}, options_.reply_timeout, [&](std::uint32_t i, bool) { send_plain(i, h, &body); });
    if (!replies) return tl::unexpected(replies.error());
    auto& r = (*replies)[0];
    if (r.header.type != MessageType::kChunk || r.frames.size() != 1)
        return make_error(ErrorCode::kProtocol, "CHUNK reply without its body");
    return wire::decode_chunk_grant(view(r.frames[0]));
}

Result<wire::JoinGrant> PsClient::join(const wire::JoinRequest& request) {
    Header h = make_header(MessageType::kJoin);
    const std::string body = wire::encode_join_request(request);
    h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    send_plain(0, h, &body);
    auto replies = collect({0}, options_.connect_timeout);
    if (!replies) return tl::unexpected(replies.error());
    auto& r = (*replies)[0];
    if (r.header.type != MessageType::kJoin || r.frames.size() != 1)
        return make_error(ErrorCode::kProtocol, "JOIN reply without its body");
    return wire::decode_join_grant(view(r.frames[0]));
}

}  // namespace psrun
