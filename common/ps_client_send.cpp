// PsClient's send paths (common/ps_client.h): every request goes out through send_message(),
// which seals it with a MAC trailer on a --auth mac shard; open_reply() checks a reply's trailer.
// Payload frames are built in common/ps_client_payload.cpp, the rest of the client is in ps_client.cpp.
#include "common/ps_client.h"
#include "common/zmq_util.h"

namespace psrun {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

void PsClient::send_plain(std::uint32_t shard, const Header& header, const std::string* body) {
    std::vector<zmq::message_t> payloads;
    if (body) payloads.emplace_back(body->data(), body->size());
    send_message(shard, header, payloads);
}

void PsClient::send_message(std::uint32_t shard, Header header, std::vector<zmq::message_t>& payloads) {
    const bool sealed = mac_shard_[shard];
    if (sealed) header.flags |= wire::kFlagMac;
    const std::string bytes = wire::encode_header(header);
    std::string trailer;
    if (sealed) {
        std::vector<ByteRange> frames{ByteRange{bytes.data(), bytes.size()}};
        for (const auto& p : payloads) frames.push_back(ByteRange{p.data(), p.size()});
        trailer = sealer_->seal(static_cast<std::uint16_t>(shard), frames);
    }
    const auto more = [](bool m) { return m ? zmq::send_flags::sndmore : zmq::send_flags::none; };
    auto& s = sockets_[shard];
    s.send(zmq::buffer(bytes), more(!payloads.empty() || sealed));
    for (std::size_t k = 0; k < payloads.size(); ++k) s.send(payloads[k], more(k + 1 < payloads.size() || sealed));
    if (sealed) s.send(zmq::buffer(trailer), zmq::send_flags::none);
}

Result<void> PsClient::open_reply(std::uint32_t shard, const Header& header, std::vector<zmq::message_t>& parts) const {
    const std::string who = "ps " + std::to_string(shard);
    if (!mac_shard_[shard]) {
        if (header.flags & wire::kFlagMac)
            return make_error(ErrorCode::kProtocol, who + " runs --auth mac: give every task the same --auth");
        return {};
    }
    if (!(header.flags & wire::kFlagMac)) {
        // psd answers a request it could not verify without a MAC (it has no key to bind it to);
        // such an ERROR is reported, marked, and any other unsealed reply is refused.
        if (header.type == MessageType::kError) return {};
        return make_error(ErrorCode::kUnauthorized, who + " sent a reply without a MAC: does it run --auth curve?");
    }
    if (parts.size() < 2) return make_error(ErrorCode::kProtocol, who + ": a sealed reply without its trailer");
    std::vector<ByteRange> frames;
    for (std::size_t i = 0; i + 1 < parts.size(); ++i) frames.push_back(ByteRange{parts[i].data(), parts[i].size()});
    if (auto ok = sealer_->open(static_cast<std::uint16_t>(shard), frames, view(parts.back())); !ok)
        return make_error(ErrorCode::kUnauthorized, who + ": " + ok.error().message);
    parts.pop_back();
    return {};
}

}  // namespace psrun
