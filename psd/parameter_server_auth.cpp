// Message authentication of ParameterServer (--auth mac, common/message_auth.h): requests are
// verified before dispatch; replies are sealed by send_reply() (psd/parameter_server_replies.cpp).
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
                    std::string("this psd does not use --auth mac (") +
                        (options_.keys ? "CURVE or owner-only ipc" : "--no-auth") +
                        "): give every task the same --auth");
        return false;
    }
    if (!(h.flags & wire::kFlagMac) || parts.size() < 3) {
        verifier_->forget(routing);
        ++counters_.unauthorized;
        log_refusal("a message without a MAC (--auth mac)");
        reply_error(routing, ErrorCode::kUnauthorized,
                    "this psd runs --auth mac: every message needs the job key's MAC");
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

}  // namespace psrun::psd
