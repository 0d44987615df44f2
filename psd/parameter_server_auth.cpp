// Message authentication of ParameterServer (--auth mac, common/message_auth.h): requests are
// verified before dispatch, and every reply goes out through send_reply(), which seals it when the
// request it answers was sealed.
#include <spdlog/spdlog.h>

#include "common/zmq_util.h"
#include "psd/parameter_server.h"

namespace psrun::psd {

using wire::Header;

bool ParameterServer::authenticate(const std::string& routing, const Header& h, Parts& parts) {
    if (!verifier_) {
        if (!(h.flags & wire::kFlagMac)) return true;
        ++counters_.unauthorized;
        log_refusal("a message with a MAC trailer");
        reply_error(routing, ErrorCode::kUnauthorized,
                    std::string("this psd does not use --auth mac (") + (options_.keys ? "CURVE or owner-only ipc" : "--no-auth") +
                        "): give every task the same --auth");
        return false;
    }
    if (!(h.flags & wire::kFlagMac) || parts.size() < 3) {
        verifier_->forget(routing);
        ++counters_.unauthorized;
        log_refusal("a message without a MAC (--auth mac)");
        reply_error(routing, ErrorCode::kUnauthorized, "this psd runs --auth mac: every message needs the job key's MAC");
        return false;
    }
    std::vector<ByteRange> frames;
    for (std::size_t i = 1; i + 1 < parts.size(); ++i) frames.push_back(ByteRange{parts[i].data(), parts[i].size()});
    auto ok = verifier_->verify(routing, frames, view(parts.back()));
    if (!ok) {
        ++counters_.unauthorized;
        log_refusal(ok.error().message);
        reply_error(routing, ErrorCode::kUnauthorized, "message refused: " + ok.error().message);
        return false;
    }
    parts.pop_back();
    return true;
}

void ParameterServer::send_reply(const std::string& routing, Header& h, std::vector<zmq::message_t>& payloads) {
    const bool sealed = verifier_ && verifier_->can_seal(routing);
    if (sealed) h.flags |= wire::kFlagMac;
    const std::string bytes = wire::encode_header(h);
    std::optional<std::string> trailer;
    if (sealed) {
        std::vector<ByteRange> frames{ByteRange{bytes.data(), bytes.size()}};
        for (const auto& p : payloads) frames.push_back(ByteRange{p.data(), p.size()});
        trailer = verifier_->seal_reply(routing, frames);
    }
    const auto more = [](bool m) { return m ? zmq::send_flags::sndmore : zmq::send_flags::none; };
    socket_.send(zmq::buffer(routing), zmq::send_flags::sndmore);
    socket_.send(zmq::buffer(bytes), more(!payloads.empty() || trailer));
    for (std::size_t k = 0; k < payloads.size(); ++k) socket_.send(payloads[k], more(k + 1 < payloads.size() || trailer));
    if (trailer) socket_.send(zmq::buffer(*trailer), zmq::send_flags::none);
}

}  // namespace psrun::psd
