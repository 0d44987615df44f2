// PsClient::chunk (docs/protocol.md "Elastic data"): one CHUNK request to psd 0; PsClient::join
// (docs/protocol.md "Joining"): one JOIN request to psd 0.
#include "common/ps_client.h"
#include "common/zmq_util.h"

namespace psrun {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

Result<wire::ChunkGrant> PsClient::chunk(const wire::ChunkRequest& request) {
    const std::string body = wire::encode_chunk_request(request);
    // A psd lost and back (the same process) gets the request again: a chunk leased by the lost
    // reply stays with this worker until its DONE, which returns it to the queue.
    PSRUN_TRY_ASSIGN(auto replies,
                     control_request({0}, make_header(MessageType::kChunk), &body, options_.reply_timeout));
    auto& r = replies[0];
    if (r.header.type != MessageType::kChunk || r.frames.size() != 1)
        return make_error(ErrorCode::kProtocol, "CHUNK reply without its body");
    return wire::decode_chunk_grant(view(r.frames[0]));
}

Result<wire::JoinGrant> PsClient::join(const wire::JoinRequest& request) {
    Header h = make_header(MessageType::kJoin);
    const std::string body = wire::encode_join_request(request);
    h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body.size())});
    send_plain(0, h, &body);
    PSRUN_TRY_ASSIGN(auto replies, collect({0}, options_.connect_timeout));
    auto& r = replies[0];
    if (r.header.type != MessageType::kJoin || r.frames.size() != 1)
        return make_error(ErrorCode::kProtocol, "JOIN reply without its body");
    return wire::decode_join_grant(view(r.frames[0]));
}

}  // namespace psrun
