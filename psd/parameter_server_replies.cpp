// ParameterServer's replies: every reply goes out through send_reply() to the transport, which
// seals it with a MAC trailer when the request it answers was sealed (--auth mac, psd/zmq_transport.h).
// PARAMS payloads are built in psd/parameter_server_payload.cpp.
#include <spdlog/spdlog.h>

#include "common/zmq_util.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

using wire::FrameDesc;
using wire::Header;
using wire::MessageType;

void ParameterServer::reply(const std::string& routing, MessageType type, std::uint32_t flags, const std::string* body,
                            std::vector<FrameDesc> descs, std::vector<zmq::message_t> frames) {
    Header h;
    h.type = type;
    h.role = wire::Role::kPs;
    h.token = options_.token;
    h.index = options_.index;
    h.flags = flags | take_rejoined(routing);
    if (h.flags & wire::kFlagRejoined) h.aux = static_cast<std::uint64_t>(options_.worker_timeout.count());
    h.step = shard_ ? shard_->step() : 0;
    std::vector<zmq::message_t> payloads;
    if (body) {
        h.frames.push_back(FrameDesc{wire::kBodyFrame, static_cast<std::uint32_t>(body->size())});
        payloads.emplace_back(body->data(), body->size());
    }
    h.frames.insert(h.frames.end(), descs.begin(), descs.end());
    for (auto& f : frames) payloads.push_back(std::move(f));
    send_reply(routing, h, payloads);
}

void ParameterServer::reply_error(const std::string& routing, ErrorCode code, const std::string& reason) {
    ++counters_.errors;
    spdlog::debug("ERROR reply: {}", reason);
    const std::string body = wire::encode_error(wire::ErrorBody{code, reason});
    reply(routing, MessageType::kError, 0, &body);
}

bool ParameterServer::survive_exception(const Parts& parts, std::uint64_t replies_before, const std::string& what) {
    if ((shard_ && shard_->torn()) || (sync_ && sync_->torn())) {
        spdlog::critical(
            "handling a message threw while the shard was being written ({}): its parameters may be "
            "half-updated, so psd stops serving them (the job resumes from its last checkpoint)",
            what);
        return false;
    }
    ++handler_exceptions_;
    log_refusal("a message whose handling threw (" + what + "); the shard is unchanged");
    if (parts.empty() || replies_sent_ != replies_before) return true;
    try {
        reply_error(std::string(view(parts[0])), ErrorCode::kUnsupported,
                    "psd could not handle this request (" + what + "): it was dropped, the shard is unchanged");
    } catch (const std::exception& e) {
        spdlog::warn("could not answer that message either: {}", e.what());
    }
    return true;
}

void ParameterServer::release_pending(std::vector<Pending>& pending, std::uint32_t flags) {
    for (const auto& p : pending) {
        if (p.type == MessageType::kPush) reply(p.routing, MessageType::kAck, flags);
        else reply_params(p.routing, flags | p.reply_flags, false, pull_slices(p.pulls));
    }
    pending.clear();
}

void ParameterServer::send_reply(const std::string& routing, Header& h, std::vector<zmq::message_t>& payloads) {
    transport_->send(routing, h, payloads);
    ++replies_sent_;
}

}  // namespace psrun::psd
